"""A Jupyter Kernel Gateway started by us, on this machine, for as long as
we want it: ``LocalJupyterServer``.

It listens on loopback with a generated token, kernels listed
(``--JupyterWebsocketPersonality.list_kernels=True``, refused otherwise).
It is stopped on ``stop()``/``close()``, at interpreter exit, and when the
host process dies (PR_SET_PDEATHSIG, set from a thread that lives as long as
the process); its kernels exit with it (ipykernel watches its parent). One
server serves many executors, each with a kernel of its own.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from typing import Self

from ..._errors import BackendUnavailableError, ExecboxError, install_hint
from ...jail import spawn_kept
from ._gateway import JupyterConnectionInfo

__all__ = ["LocalJupyterServer"]

HINT = install_hint("gateway")  # jupyter_kernel_gateway
START_TIMEOUT_S = 60.0
PR_SET_PDEATHSIG = 1
_servers: weakref.WeakSet[LocalJupyterServer] = weakref.WeakSet()


class LocalJupyterServer:
    """``jupyter kernelgateway`` as a child process.

    - ``python``: the interpreter that has jupyter_kernel_gateway (and the
      ipykernel its kernels use); this one by default.
    - ``port``: a free one by default. ``ip``: 127.0.0.1.
    - ``args``: more command-line options for the gateway.

    ``connection_info`` is what ``JupyterExecutor(kernel=...)`` takes; the
    server itself is accepted too.
    """

    def __init__(
        self,
        *,
        python: str | None = None,
        ip: str = "127.0.0.1",
        port: int | None = None,
        token: str | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.python = python or sys.executable
        self.ip = ip
        self.port = port
        self.token = token or secrets.token_hex(24)
        self.args = list(args)
        self._proc: subprocess.Popen[bytes] | None = None
        self._dir = ""

    @property
    def connection_info(self) -> JupyterConnectionInfo:
        if self._proc is None:
            self.start()
        assert self.port is not None
        return JupyterConnectionInfo(self.ip, self.port, token=self.token, shared_files=True)

    def start(self) -> Self:
        if self._proc is not None and self._proc.poll() is None:
            return self
        self._dir = tempfile.mkdtemp(prefix="execbox-gateway-")
        for attempt in range(3):  # a free port can be taken between our look and its bind
            port = self.port or _free_port(self.ip)
            argv = [
                self.python,
                "-m",
                "kernel_gateway",
                f"--KernelGatewayApp.ip={self.ip}",
                f"--KernelGatewayApp.port={port}",
                "--KernelGatewayApp.port_retries=0",
                f"--KernelGatewayApp.auth_token={self.token}",
                "--JupyterWebsocketPersonality.list_kernels=True",
                *self.args,
            ]
            log = open(os.path.join(self._dir, "gateway.log"), "wb")  # noqa: SIM115 - the child's
            try:
                self._proc = spawn_kept(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    cwd=self._dir,
                    preexec_fn=_die_with_parent,
                    start_new_session=True,
                )
            except OSError as exc:
                raise BackendUnavailableError("jupyter", f"cannot start {self.python}: {exc}") from exc
            finally:
                log.close()
            self.port = port
            if self._wait_ready():
                _servers.add(self)
                return self
            self.stop()
            if "already in use" not in self._log_tail() or attempt == 2:
                break
            self.port = None
        raise BackendUnavailableError(
            "jupyter", f"the kernel gateway did not start: {self._log_tail() or 'no output'} ({HINT})"
        )

    def _wait_ready(self) -> bool:
        info = JupyterConnectionInfo(self.ip, self.port or 0, token=self.token)
        end = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < end:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                info.request("GET", "/api/kernelspecs", timeout=2)
                return True
            except ExecboxError:
                time.sleep(0.05)
        return False

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._dir, "gateway.log"), "rb") as handle:
                return handle.read()[-1500:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def stop(self) -> None:
        """Stop the server; its kernels exit with it."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()  # the gateway shuts its kernels down on SIGTERM
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = ""

    close = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _free_port(ip: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((ip, 0))
        return int(probe.getsockname()[1])


_prctl = ctypes.CDLL(None, use_errno=True).prctl  # made here, not between fork and exec


def _die_with_parent() -> None:  # in the child, before exec
    _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@atexit.register
def _stop_all() -> None:
    for server in list(_servers):
        server.stop()
