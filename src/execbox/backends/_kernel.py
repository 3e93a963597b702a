"""Where a Jupyter kernel runs, apart from how we talk to it: a local
kernel started with ``jupyter_client`` directly (no server).

The kernel is the executor's interpreter running ``ipykernel_launcher``
(so a ``Venv`` with ipykernel works), over IPC sockets in a private folder,
in the workspace, with the executor's environment. jupyter_client passes our
pid as JPY_PARENT_PID, and ipykernel exits when that process is gone, so a
killed host leaves no kernel behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Mapping
from typing import Any

from .._errors import BackendUnavailableError

__all__ = ["LocalKernel", "kernel_descendants", "kill_pid"]

INSTALL_HINT = "pip install 'execbox[jupyter]' (jupyter_client and ipykernel)"
READY_TIMEOUT_S = 60.0


def _kernel_manager_class() -> Any:
    try:
        from jupyter_client.manager import KernelManager
    except ImportError as exc:
        raise BackendUnavailableError("jupyter", f"jupyter_client is not installed: {INSTALL_HINT}") from exc
    return KernelManager


class LocalKernel:
    """One kernel process on this machine and a blocking client for it."""

    def __init__(self, *, python: str, cwd: str, env: Mapping[str, str], kernel_name: str | None = None) -> None:
        self.python = python
        self.cwd = cwd
        self.env = dict(env)
        self.kernel_name = kernel_name
        self._manager: Any = None
        self.client: Any = None
        self._runtime = tempfile.mkdtemp(prefix="execbox-kernel-")
        self.restarted = False  # set by restart(): the owner re-runs its set-up

    def start(self) -> None:
        manager_class = _kernel_manager_class()
        connection = os.path.join(self._runtime, "kernel.json")
        if self.kernel_name:
            manager = manager_class(kernel_name=self.kernel_name, connection_file=connection)
        else:
            manager = manager_class(connection_file=connection)
            manager.kernel_cmd = [self.python, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        manager.transport = "ipc"
        manager.ip = os.path.join(self._runtime, "ipc")
        try:
            manager.start_kernel(cwd=self.cwd, env=dict(self.env), independent=False)
        except Exception as exc:  # noqa: BLE001 - any launch failure is the same news
            raise BackendUnavailableError(
                "jupyter", f"the kernel did not start ({exc}): is ipykernel installed for "
                           f"{self.python}? {INSTALL_HINT}") from exc
        self._manager = manager
        client = manager.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=READY_TIMEOUT_S)
        except RuntimeError as exc:
            client.stop_channels()
            self._shutdown_manager()
            raise BackendUnavailableError("jupyter", f"the kernel did not become ready: {exc}") from exc
        self.client = client

    @property
    def pid(self) -> int | None:
        provisioner = getattr(self._manager, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return getattr(process, "pid", None)

    def alive(self) -> bool:
        return self._manager is not None and bool(self._manager.is_alive())

    def exit_code(self) -> int | None:
        provisioner = getattr(self._manager, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return None if process is None else process.poll()

    def interrupt(self) -> None:
        if self._manager is not None:
            self._manager.interrupt_kernel()

    def restart(self) -> None:
        """A fresh kernel (state lost)."""
        self.stop()
        self._runtime = tempfile.mkdtemp(prefix="execbox-kernel-")
        self.start()
        self.restarted = True

    def stop(self) -> None:
        if self.client is not None:
            self.client.stop_channels()
            self.client = None
        self._shutdown_manager()
        shutil.rmtree(self._runtime, ignore_errors=True)

    def _shutdown_manager(self) -> None:
        if self._manager is None:
            return
        pid = self.pid
        for child in kernel_descendants(pid) if pid else []:
            kill_pid(child)
        try:
            self._manager.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001 - a dead kernel's shutdown may complain; it is gone either way
            if pid:
                kill_pid(pid)
        self._manager = None


def kernel_descendants(pid: int) -> list[int]:
    """Pids of every process below ``pid`` (by parent links), deepest last."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
