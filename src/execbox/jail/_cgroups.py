"""Per-block control groups: memory, process and CPU limits, a way to kill
everything a block started, and whether the kernel's OOM killer struck.

cgroup v1 (a hierarchy per controller, as on this project's CI machines) and
v2 (one unified hierarchy, most current hosts) are detected once
(``_cgroup_detect.py``). Each block
gets a group of its own under ``<our cgroup>/execbox-<pid>/``; a process joins
it by writing ``0`` into the group's ``cgroup.procs`` (so a process inside a
namespace can join through a descriptor the host opened for it).

On v2 a user who is not root gets groups in a delegated subtree (systemd's
``Delegate=yes``, or a group chowned to the user): the groups go beside
ours when our parent is ours to write, else inside our own group, after its
processes (this one among them) move to a leaf, ``execbox-leaf``: v2 lets
no group with processes give its children controllers.
"""

from __future__ import annotations

import atexit
import itertools
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ._cgroup_detect import detect
from ._cgroup_fs import rmdir, write, write_try

__all__ = ["BlockCgroup", "BlockGroup", "CgroupSupport", "cgroup_support"]

CPU_PERIOD_US = 100_000
_names = itertools.count(1)


class BlockGroup(Protocol):
    """What a block's runner asks of the cgroup a block ran in: its own
    (``BlockCgroup``) or its share of a pool box's (``_box.BlockShare``)."""

    def kill(self) -> None: ...
    def oom_killed(self) -> bool: ...
    def peak_memory_mb(self) -> float | None: ...
    def pids(self) -> list[int]: ...
    def pids_current(self) -> int: ...
    def remove(self) -> None: ...


@dataclass(frozen=True)
class CgroupSupport:
    """Where this process can create per-block groups (``None`` from
    ``cgroup_support()`` means nowhere; ``reason`` then says why)."""

    version: int
    bases: dict[str, Path]  # controller -> directory under which groups are made (v2: one dir)

    def create(self, *, memory_mb: int | None, max_processes: int | None, cpus: float | None) -> BlockCgroup:
        name = f"b{next(_names)}-{os.urandom(3).hex()}"
        # v1: a group in the hierarchies of the limits set only (memory always: the OOM report);
        # each group costs ~0.1 ms of the host's CPU to make, fill, empty and remove
        wanted = {"memory": True, "pids": bool(max_processes), "cpu": bool(cpus)}
        bases = {c: b for c, b in self.bases.items() if self.version == 2 or wanted[c]}
        dirs = sorted({base / name for base in bases.values()})
        made: list[Path] = []
        try:
            for path in dirs:
                path.mkdir()
                made.append(path)
            group = BlockCgroup(self.version, {c: b / name for c, b in bases.items()}, made)
            group.set_limits(memory_mb, max_processes, cpus)
            return group
        except BaseException:
            for path in reversed(made):
                rmdir(path)
            raise


class BlockCgroup:
    """One block's group (a directory per hierarchy on v1)."""

    def __init__(self, version: int, by_controller: dict[str, Path], dirs: list[Path]) -> None:
        self.version = version
        self.by_controller = by_controller
        self.dirs = dirs

    def set_limits(self, memory_mb: int | None, max_processes: int | None, cpus: float | None) -> None:
        mem = self.by_controller["memory"]
        if memory_mb:
            limit = str(memory_mb * 1024 * 1024)
            if self.version == 1:
                write(mem / "memory.limit_in_bytes", limit)
                write_try(mem / "memory.memsw.limit_in_bytes", limit)  # no escape into swap
            else:
                write(mem / "memory.max", limit)
                write_try(mem / "memory.swap.max", "0")
        if max_processes:
            write(self.by_controller["pids"] / "pids.max", str(max_processes))
        if cpus:
            quota = max(1000, int(cpus * CPU_PERIOD_US))
            cpu = self.by_controller["cpu"]
            if self.version == 1:
                write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                write(cpu / "cpu.cfs_quota_us", str(quota))
            else:
                write(cpu / "cpu.max", f"{quota} {CPU_PERIOD_US}")

    def open_procs(self) -> list[int]:
        """Write-only descriptors of each ``cgroup.procs``: writing ``0`` to
        all of them moves the writer into this group."""
        fds: list[int] = []
        try:
            for path in self.dirs:
                fds.append(os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.dirs:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def pids_current(self) -> int:
        """Tasks (threads included) in the group: what a pids limit counts."""
        try:
            return int((self.by_controller["pids"] / "pids.current").read_text())
        except (OSError, ValueError, KeyError):
            return 0

    def kill(self) -> None:
        """SIGKILL every process in the group (repeated: a forking process
        may add more between two reads; the pids limit bounds that)."""
        if self.version == 2:
            try:
                write(self.dirs[0] / "cgroup.kill", "1")
                return
            except OSError:
                pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this group for memory."""
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        """How many processes of this group the kernel killed for memory."""
        mem = self.by_controller.get("memory")
        if mem is None:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (mem / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak_memory_mb(self) -> float | None:
        """The most memory the group's processes held at once (None where
        the kernel does not say: cgroup v2 before Linux 5.19)."""
        mem = self.by_controller.get("memory")
        if mem is None:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return round(int((mem / name).read_text()) / (1 << 20), 1)
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Kill what is left and remove the group, in the background (the
        last processes of a block may take a few ms to be gone)."""
        _janitor.put(self)


class _Janitor:
    """Removes groups whose processes are still exiting."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[BlockCgroup] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, group: BlockCgroup) -> None:
        self._queue.put(group)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="execbox-cgroups", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            group = self._queue.get()
            # Mostly the block's PID namespace has already taken its processes down and the
            # groups are empty: removed at once, no scan of cgroup.procs; else killed, then removed.
            left = [path for path in group.dirs if not rmdir(path)]
            if left:
                group.kill()
            for path in left:
                if not rmdir(path, wait_s=5.0):
                    _leftovers.add(path)


_janitor = _Janitor()
_leftovers: set[Path] = set()
_lock = threading.Lock()
_cached: CgroupSupport | None = None
_reason = ""
_detected = False


def cgroup_support() -> tuple[CgroupSupport | None, str]:
    """(support, reason it is missing). Detected once per process."""
    global _cached, _reason, _detected
    with _lock:
        if not _detected:
            try:
                found, _reason = detect()
                _cached = CgroupSupport(*found) if found is not None else None
            except OSError as exc:
                _cached, _reason = None, f"cgroups could not be read: {exc}"
            _detected = True
            if _cached is not None:
                atexit.register(_cleanup, _cached)
        return _cached, _reason


def _cleanup(support: CgroupSupport) -> None:
    while True:  # what the janitor has not got to yet
        try:
            group = _janitor._queue.get_nowait()
        except queue.Empty:
            break
        group.kill()
        for path in group.dirs:
            if not rmdir(path, wait_s=0.5):
                _leftovers.add(path)
    for path in list(_leftovers):
        rmdir(path, wait_s=0.2)
    for base in set(support.bases.values()):
        rmdir(base, wait_s=0.2)
