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

from ..._errors import BackendUnavailableError, install_hint
from .._process import TOKEN_VAR, kill_marked
from ._channels import ZmqChannels, wait_ready
from ._kernel_base import Kernel

__all__ = [
    "KERNEL_ARGS",
    "LocalKernel",
    "kernel_children",
    "kernel_descendants",
    "kill_pid",
    "kill_started_by",
]

INSTALL_HINT = install_hint("jupyter")  # jupyter_client and ipykernel
READY_TIMEOUT_S = 60.0
# No history database: IPython writes each cell to SQLite, ~0.8 ms a cell here
# (In, Out and %history still work, from memory).
KERNEL_ARGS = ("-m", "ipykernel_launcher", "--HistoryManager.enabled=False", "-f")


def _kernel_manager_class() -> Any:
    try:
        from jupyter_client.manager import KernelManager
    except ImportError as exc:
        raise BackendUnavailableError("jupyter", f"jupyter_client is not installed: {INSTALL_HINT}") from exc
    return KernelManager


class LocalKernel(Kernel):
    """One kernel process on this machine and its channels."""

    def __init__(
        self, *, python: str, cwd: str, env: Mapping[str, str], kernel_name: str | None = None
    ) -> None:
        self.python = python
        self.cwd = cwd
        self.env = dict(env)
        self.kernel_name = kernel_name
        self._manager: Any = None
        self.channels: ZmqChannels | None = None
        self._runtime = ""

    def start(self) -> None:
        manager_class = _kernel_manager_class()
        self._runtime = tempfile.mkdtemp(prefix="execbox-kernel-")
        connection = os.path.join(self._runtime, "kernel.json")
        if self.kernel_name:
            manager = manager_class(kernel_name=self.kernel_name, connection_file=connection)
        else:
            manager = manager_class(connection_file=connection)
            manager.kernel_cmd = [self.python, *KERNEL_ARGS, "{connection_file}"]
        manager.transport = "ipc"
        manager.ip = os.path.join(self._runtime, "ipc")
        try:
            manager.start_kernel(cwd=self.cwd, env=dict(self.env), independent=False)
        except Exception as exc:
            raise BackendUnavailableError(
                "jupyter",
                f"the kernel did not start ({exc}): is ipykernel installed for {self.python}? {INSTALL_HINT}",
            ) from exc
        self._manager = manager
        self.pid = getattr(getattr(getattr(manager, "provisioner", None), "process", None), "pid", None)
        self.channels = ZmqChannels(manager.get_connection_info())
        try:
            wait_ready(
                self.channels,
                self.alive,
                READY_TIMEOUT_S,
                lambda: f"exit code {self.exit_code()}; is ipykernel installed for {self.python}?",
            )
        except BaseException:
            self.stop()
            raise

    def alive(self) -> bool:
        return self._manager is not None and bool(self._manager.is_alive())

    def exit_code(self) -> int | None:
        provisioner = getattr(self._manager, "provisioner", None)
        process = getattr(provisioner, "process", None)
        return None if process is None else process.poll()

    def interrupt(self) -> None:
        if self._manager is not None:
            self._manager.interrupt_kernel()

    def kill_strays(self) -> None:
        """Every process the last cell started (they carry the executor's
        token in their environment, or descend from the kernel)."""
        kill_started_by(self.pid, self.env.get(TOKEN_VAR))

    def stop(self) -> None:
        if self.channels is not None:
            self.channels.close()
            self.channels = None
        self._shutdown_manager()
        self.pid = None
        if self._runtime:
            shutil.rmtree(self._runtime, ignore_errors=True)
            self._runtime = ""

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
    """Pids of every process below ``pid``, parents before their children
    (walked down the children lists, not read from all of /proc)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in kernel_children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def kernel_children(pid: int) -> list[int]:
    """Direct children of ``pid``, from each of its threads' children list."""
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children", "rb") as handle:
                found.extend(int(p) for p in handle.read().split())
        except (OSError, ValueError):
            continue
    return found


def kill_started_by(pid: int | None, token: str | None) -> None:
    """Kill what the kernel ``pid`` started for its cells: processes that
    carry the executor's ``token`` in their environment (daemons that left
    the tree), and every process below the kernel. The kernel is spared."""
    if pid and token:
        kill_marked(token, born_after=pid, spare=pid, descendants_of=pid)


def kill_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
