"""Run one command to completion: capture, deadline, cancellation, and no
process left behind.

The child starts in a session (and process group) of its own and carries a
random token in its environment. When it exits, times out or is cancelled,
everything it started is killed: its process group, then every process whose
environment carries the token (a ``setsid`` or double-forked daemon leaves the
group but keeps the environment). Only then is the child reaped, so its pid
cannot be reused under us.

The loop waits on the output pipes, a pidfd (the child's exit) and a
cancellation pipe with one ``select``: no thread per stream, no polling.
"""

from __future__ import annotations

import codecs
import os
import resource
import secrets
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._output import Capture

__all__ = ["TOKEN_VAR", "Cancellation", "ProcessOutcome", "Watched", "kill_marked", "new_token", "run_process",
           "watch"]

TOKEN_VAR = "EXECBOX_RUN_TOKEN"
# After the child has exited or been killed, how long to keep reading what
# is still in the pipes before giving up on a holder we could not kill.
DRAIN_GRACE_S = 2.0
_READ_SIZE = 1 << 16

OutputCallback = Callable[[str, str], None]


def new_token() -> str:
    return secrets.token_hex(12)


class Cancellation:
    """A thread-safe flag that wakes a running ``run_process``."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)

    @property
    def fileno(self) -> int:
        return self._read_fd

    def is_set(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        if not self._event.is_set():
            self._event.set()
            try:
                os.write(self._write_fd, b"x")
            except OSError:
                pass

    def close(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class ProcessOutcome:
    exit_code: int
    capture: Capture
    timed_out: bool
    cancelled: bool
    duration_s: float
    memory_exceeded_mb: int | None = None  # set when the kernel killed it at a memory limit
    address_space_mb: int | None = None  # the RLIMIT_AS that stood in for a memory limit, if one did


def run_process(
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    timeout_s: float,
    output_limit: int,
    memory_mb: int | None = None,
    cancel: Cancellation | None = None,
    on_output: OutputCallback | None = None,
    token: str | None = None,
    preexec: Callable[[], None] | None = None,
    pass_fds: Sequence[int] = (),
    also_kill: Callable[[], None] | None = None,
) -> ProcessOutcome:
    """Run ``argv`` and return its exit code and bounded output.

    ``token`` marks the run's processes (made up when not given; a wrapper
    that clears the environment, like bubblewrap, must pass it on itself).
    ``preexec`` runs in the child before the exec (keep it to system calls);
    ``also_kill`` runs whenever the run's processes are killed.
    Exit codes: the child's own; 128+N for death by signal N; 124 on timeout.
    """
    token = token or new_token()
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env={**env, TOKEN_VAR: token},
        start_new_session=True,
        close_fds=True,
        pass_fds=tuple(pass_fds),
        preexec_fn=preexec,
    )
    if memory_mb:
        _limit_memory(proc.pid, memory_mb)
    assert proc.stdout is not None and proc.stderr is not None
    watched = _Child(proc, token, also_kill)
    try:
        capture, timed_out, cancelled = watch(proc.stdout.fileno(), proc.stderr.fileno(), watched,
                                              deadline=started + timeout_s, output_limit=output_limit,
                                              cancel=cancel, on_output=on_output)
    finally:
        watched.finish()
    code = proc.returncode
    if timed_out:
        code = 124
    elif code < 0:
        code = 128 - code
    return ProcessOutcome(code, capture, timed_out, cancelled, time.monotonic() - started)


class Watched(Protocol):
    """A running block as ``watch`` sees it."""

    exit_fd: int | None  # readable once it has ended (None: poll ``exited``)

    def exited(self) -> bool:
        """Called when ``exit_fd`` is readable, or every 10 ms without one."""

    def kill(self) -> None:
        """Kill the block and everything it started."""


def watch(stdout_fd: int, stderr_fd: int, watched: Watched, *, deadline: float, output_limit: int,
          cancel: Cancellation | None, on_output: OutputCallback | None) -> tuple[Capture, bool, bool]:
    """Read both pipes until they close, with a deadline and cancellation.

    When the block ends, times out or is cancelled, ``watched.kill()`` runs
    once, then what is still in the pipes is read for up to DRAIN_GRACE_S.
    Returns (capture, timed_out, cancelled)."""
    capture = Capture(output_limit)
    decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("stdout", "stderr")}
    killed = False

    def kill() -> None:
        nonlocal killed
        killed = True
        watched.kill()

    with selectors.DefaultSelector() as sel:
        sel.register(stdout_fd, selectors.EVENT_READ, "stdout")
        sel.register(stderr_fd, selectors.EVENT_READ, "stderr")
        if watched.exit_fd is not None:
            sel.register(watched.exit_fd, selectors.EVENT_READ, "exit")
        if cancel is not None:
            sel.register(cancel.fileno, selectors.EVENT_READ, "cancel")
            if cancel.is_set():
                kill()
                return capture, False, True
        streams = 2
        exited = False
        timed_out = cancelled = False
        drain_until: float | None = None
        # until both pipes close and the block has ended (it may close its
        # output and go on working), or the drain after a kill runs out
        while streams or not (exited or killed):
            now = time.monotonic()
            limit = drain_until if drain_until is not None else deadline
            if now >= limit:
                if drain_until is not None:
                    break  # something we could not kill holds the pipes
                timed_out = True
                kill()
                drain_until = now + DRAIN_GRACE_S
                continue
            wait = limit - now
            if watched.exit_fd is None and not exited:
                wait = min(wait, 0.01)
            for key, _ in sel.select(wait):
                what = key.data
                if what in ("stdout", "stderr"):
                    data = os.read(key.fd, _READ_SIZE)
                    if data:
                        capture.feed(what, data)
                        if on_output is not None:
                            text = decoders[what].decode(data)
                            if text:
                                on_output(what, text)
                    else:
                        sel.unregister(key.fileobj)
                        streams -= 1
                elif what == "exit":
                    if watched.exited():
                        sel.unregister(key.fileobj)
                        exited = True
                elif what == "cancel":
                    sel.unregister(key.fileobj)
                    cancelled = True
                    kill()
                    drain_until = time.monotonic() + DRAIN_GRACE_S
            if not exited and watched.exit_fd is None:
                exited = watched.exited()
            if exited and not killed:
                # The block is done: whatever it left running goes too, so that
                # a grandchild holding the pipes cannot keep us waiting.
                kill()
                drain_until = time.monotonic() + DRAIN_GRACE_S
        if not killed:
            kill()
    return capture, timed_out, cancelled


class _Child:
    """A ``subprocess.Popen`` child, watched through a pidfd."""

    def __init__(self, proc: subprocess.Popen[bytes], token: str,
                 also_kill: Callable[[], None] | None = None) -> None:
        self.proc = proc
        self.token = token
        self.also_kill = also_kill
        self.exit_fd = _pidfd_open(proc.pid)

    def exited(self) -> bool:
        return True if self.exit_fd is not None else _has_exited(self.proc.pid)

    def kill(self) -> None:
        """Kill the child's process group and every process with its token.

        Safe before reaping: the child's pid (and so its group id) stays ours
        until ``wait``."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        kill_marked(self.token, born_after=self.proc.pid)
        if self.also_kill is not None:
            self.also_kill()

    def finish(self) -> None:
        self.kill()
        self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        if self.exit_fd is not None:
            os.close(self.exit_fd)


def kill_marked(token: str, born_after: int = 0, rounds: int = 5, spare: int = 0,
                descendants_of: int = 0) -> int:
    """SIGKILL every process whose environment holds ``TOKEN_VAR=token`` and,
    with ``descendants_of``, every process below that pid (parent links: one
    that cleared its environment but never left the tree).

    Only processes with a pid above ``born_after`` (the run's first process)
    are read, unless the kernel's pid counter has wrapped since, in which case
    all are (a run would need to go through the whole pid space twice to
    slip past this). Repeats while it finds some (a forking process may add more
    between two scans). ``spare``: a pid left alive (a kernel that carries
    the token for its blocks). Returns how many it killed."""
    needle = f"{TOKEN_VAR}={token}".encode()
    me = os.getpid()
    floor = born_after if _last_pid() >= born_after else 0
    killed = 0
    for _ in range(rounds):
        # read everything before killing: a killed parent's children are reparented
        tree = {descendants_of} if descendants_of else set()
        victims = []
        pids = sorted(int(name) for name in os.listdir("/proc") if name.isdigit())
        for pid in pids:  # ascending: a parent comes before the children it made
            if pid < floor or pid in (me, spare):
                continue
            if tree and _parent(pid) in tree:
                tree.add(pid)
                victims.append(pid)
            elif needle in _read_proc(pid, "environ"):
                victims.append(pid)
        found = 0
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
                found += 1
            except (ProcessLookupError, PermissionError):
                pass
        killed += found
        if not found:
            break
    return killed


def _read_proc(pid: int, name: str) -> bytes:
    """/proc/<pid>/<name>, or b"" if it cannot be read (os-level calls: this
    runs after every block)."""
    try:
        fd = os.open(f"/proc/{pid}/{name}", os.O_RDONLY)
    except OSError:
        return b""
    try:
        return _read_all(fd)
    except OSError:
        return b""
    finally:
        os.close(fd)


def _parent(pid: int) -> int:
    fields = _read_proc(pid, "stat").rsplit(b")", 1)[-1].split()
    return int(fields[1]) if len(fields) > 1 else 0


def _last_pid() -> int:
    """The last pid the kernel handed out in our namespace (0 if unknown,
    which makes the scan read every process)."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 0


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _limit_memory(pid: int, memory_mb: int) -> None:
    limit = memory_mb * 1024 * 1024
    try:
        resource.prlimit(pid, resource.RLIMIT_AS, (limit, limit))
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _pidfd_open(pid: int) -> int | None:
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return None
    try:
        return opener(pid)
    except OSError:
        return None


def _has_exited(pid: int) -> bool:
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None
