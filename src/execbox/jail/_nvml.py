"""``Limits.gpu_memory_mb``: the GPU memory a block's processes hold, read
from NVML (the driver's management library, ``libnvidia-ml.so.1``, loaded
when a GPU executor with that limit starts) and polled while the block runs;
past the limit the block's cgroup is killed and the result names the limit.

NVML reports a process by the PID the driver saw, which is its PID in the
host's first PID namespace; the block's processes are its cgroup's (read by
the host, so in the host's numbers). Where execbox itself runs in a PID
namespace of a container, the two differ and nothing is matched: the limit
is then a gap (``problem``). Peers offer no such limit; the driver has none
per process either (MIG partitions a GPU, but not per block).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Sequence
from typing import Any, Self

__all__ = ["POLL_S", "GpuMemory", "GpuMemoryWatch", "gpu_memory"]

POLL_S = 0.05
JOIN_S = 2.0  # the longest a block's end waits for its watch's last NVML call
LIBRARY = "libnvidia-ml.so.1"
MAX_PROCESSES = 1024
NOT_AVAILABLE = (1 << 64) - 1  # NVML_VALUE_NOT_AVAILABLE for usedGpuMemory
_lock = threading.Lock()
_loaded: list[GpuMemory | None] = []
_why: list[str] = []


class _ProcessInfo(ctypes.Structure):  # nvmlProcessInfo_t (the _v3 calls')
    _fields_ = [
        ("pid", ctypes.c_uint),
        ("usedGpuMemory", ctypes.c_ulonglong),
        ("gpuInstanceId", ctypes.c_uint),
        ("computeInstanceId", ctypes.c_uint),
    ]


class GpuMemory:
    """NVML, initialised once per process: the compute processes of the
    GPUs by device minor (``/dev/nvidiaN``) and the memory each holds."""

    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.handles: dict[int, ctypes.c_void_p] = {}
        count = ctypes.c_uint(0)
        self._check(lib.nvmlDeviceGetCount_v2(ctypes.byref(count)), "nvmlDeviceGetCount_v2")
        for index in range(min(count.value, 256)):
            handle = ctypes.c_void_p()
            self._check(
                lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)), "nvmlDeviceGetHandleByIndex"
            )
            minor = ctypes.c_uint(0)
            self._check(lib.nvmlDeviceGetMinorNumber(handle, ctypes.byref(minor)), "nvmlDeviceGetMinorNumber")
            self.handles[minor.value] = handle
        self._lock = threading.Lock()

    def _check(self, code: int, what: str) -> None:
        if code != 0:
            raise OSError(f"NVML {what} failed with code {code}")

    def used_mb(self, minors: Sequence[int], pids: set[int]) -> float:
        """MB that processes in ``pids`` hold on the GPUs ``minors``."""
        used = 0
        infos = (_ProcessInfo * MAX_PROCESSES)()
        with self._lock:  # one NVML call at a time from this process's watches
            for minor in minors:
                handle = self.handles.get(minor)
                if handle is None:
                    continue
                count = ctypes.c_uint(MAX_PROCESSES)
                if self.lib.nvmlDeviceGetComputeRunningProcesses_v3(handle, ctypes.byref(count), infos) != 0:
                    continue
                for info in infos[: min(count.value, MAX_PROCESSES)]:
                    if info.pid in pids and info.usedGpuMemory != NOT_AVAILABLE:
                        used += info.usedGpuMemory
        return used / (1 << 20)


def gpu_memory() -> tuple[GpuMemory | None, str]:
    """NVML once per process: (it, '') or (None, why it cannot be read)."""
    with _lock:
        if not _loaded:
            try:
                lib = ctypes.CDLL(LIBRARY)
                code = lib.nvmlInit_v2()
                if code != 0:
                    raise OSError(f"nvmlInit_v2 failed with code {code}")
                _loaded.append(GpuMemory(lib))
                _why.append("")
            except (OSError, AttributeError) as exc:
                _loaded.append(None)
                _why.append(f"NVML ({LIBRARY}, the NVIDIA driver's) cannot be read here: {exc}")
        return _loaded[0], _why[0]


class GpuMemoryWatch:
    """While a block runs: its processes' GPU memory, polled; past
    ``limit_mb``, ``kill`` (the block's cgroup) and ``exceeded`` set."""

    def __init__(
        self,
        nvml: GpuMemory,
        minors: Sequence[int],
        limit_mb: int,
        pids: Callable[[], list[int]],
        kill: Callable[[], None],
    ) -> None:
        self.nvml, self.minors, self.limit_mb = nvml, list(minors), limit_mb
        self.pids, self.kill = pids, kill
        self.exceeded = False
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="execbox-gpu-memory", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        # a driver call that never returns must not hold the block's result: the thread is left
        self._thread.join(timeout=JOIN_S)

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            pids = set(self.pids())
            if not pids:
                continue
            used = self.nvml.used_mb(self.minors, pids)
            self.peak_mb = max(self.peak_mb, used)
            if used > self.limit_mb:
                self.exceeded = True
                self.kill()
                return
