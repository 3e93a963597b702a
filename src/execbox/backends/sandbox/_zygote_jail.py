"""The pool's zygote as the host runs it: its jail started, its settings
sent, its ``ready`` awaited; a box asked of it; the boxes it made taken;
stopped. The pool (``_pool``) holds one at a time and its lock around it.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._errors import BackendUnavailableError, ConfigurationError
from ...jail import BlockCgroup, Launch, receive_within, recv_fds_now, send_within, spawn_kept

__all__ = ["SEND_WAIT_S", "START_TIMEOUT_S", "ZYGOTE_INSIDE", "ZYGOTE_SOURCE", "ZygoteJail"]

# The zygote's folder (its program and what it reads), bound read-only at
# ZYGOTE_INSIDE in the jail.
ZYGOTE_SOURCE = Path(__file__).with_name("_zygote")
ZYGOTE_INSIDE = "/.execbox-zygote"
START_TIMEOUT_S = 120.0
SEND_WAIT_S = 5.0  # a request the zygote does not take within this: it is stuck


class ZygoteJail:
    """One zygote in its jail (``launcher`` makes the jail's launch from the
    zygote's command; ``config`` is sent on its socket, never in an argv)."""

    def __init__(
        self,
        launcher: Callable[[Sequence[str]], Launch],
        python: str,
        cwd: str,
        config: Mapping[str, Any],
    ) -> None:
        self.control: socket.socket | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self._log: Any = tempfile.TemporaryFile()  # noqa: SIM115 (bwrap's log for the zygote's life; closed in stop)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        flags = ["-u"] if config.get("env", {}).get("PYTHONUNBUFFERED") else []  # what -I still takes
        try:
            launch = launcher([python, "-I", *flags, ZYGOTE_INSIDE + "/zygote.py", str(theirs.fileno())])
        except BaseException:
            theirs.close()
            ours.close()
            self._log.close()
            raise
        try:
            self.proc = spawn_kept(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=[theirs.fileno(), *launch.pass_fds],
                cwd=cwd,
                start_new_session=True,
                preexec_fn=launch.preexec,
            )
        finally:
            theirs.close()
            launch.close()
        self.control = ours
        self._greet(config)

    def _greet(self, config: Mapping[str, Any]) -> None:
        assert self.control is not None
        why = ""
        try:
            send_within(
                self.control,
                json.dumps(config).encode(),
                [],
                time.monotonic() + SEND_WAIT_S,
                "the sandbox pool's zygote to take its settings",
            )
            hello = receive_within(
                self.control,
                time.monotonic() + START_TIMEOUT_S,
                1 << 16,
                0,
                "the sandbox pool's zygote to start",
            )[0]
        except OSError as exc:
            hello, why = b"", f"{exc}: "
            if exc.errno == errno.EMSGSIZE:  # one socket message: the environment is most of it
                why = (
                    f"its settings ({exc}) are too large for one message: "
                    "pass a smaller env= to the executor; "
                )
        if hello == b"ready":
            return
        tail = self.tail()
        self.stop(stuck=True)
        if hello.startswith(b"error "):
            raise ConfigurationError(
                f"sandbox pool: {hello[6:].decode(errors='replace')} (check SandboxExecutor(preload=...))"
            )
        raise BackendUnavailableError("sandbox", f"the sandbox pool did not start: {why}{tail}")

    def gone(self) -> bool:
        return self.control is None or (self.proc is not None and self.proc.poll() is not None)

    def ask(self, group: BlockCgroup | None) -> None:
        """Ask for one more box (its cgroup's cgroup.procs files with it);
        the group is removed if the zygote does not take the request."""
        assert self.control is not None
        fds = group.open_procs() if group is not None else []
        try:
            deadline = time.monotonic() + SEND_WAIT_S
            send_within(self.control, b"box", fds, deadline, "the sandbox pool's zygote to take a request")
        except BaseException:
            if group is not None:
                group.remove()
            raise
        finally:
            for fd in fds:
                os.close(fd)

    def receive(self) -> socket.socket | None:
        """A box's socket the zygote handed over, None when none is there
        now; OSError when the zygote is gone or sent something else."""
        assert self.control is not None
        try:
            data, fds = recv_fds_now(self.control, 64, 1)
        except BlockingIOError:
            return None
        if data != b"box" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            raise OSError("the sandbox pool's zygote is gone")
        return socket.socket(fileno=fds[0])

    def stop(self, stuck: bool = False) -> None:
        """Stop the zygote (``stuck``: at once, it reads nothing more); its
        jail, and every box in it, go with it."""
        if stuck and self.proc is not None:
            self.proc.kill()  # bwrap: the jail's processes die with it (--die-with-parent)
        if self.control is not None:
            self.control.close()  # the zygote sees EOF and leaves; its jail dies with it
            self.control = None
        if self.proc is not None:
            try:
                self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def tail(self) -> str:
        """The end of the jail's log (what bwrap or the zygote said)."""
        if self._log is None:
            return "(no log)"
        self._log.seek(0)
        text = self._log.read()[-2000:].decode(errors="replace").strip()
        return text or f"exit code {self.proc.poll() if self.proc else '?'}"
