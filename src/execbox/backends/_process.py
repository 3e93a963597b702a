"""Run one command to completion: capture, deadline, cancellation, and no
process left behind.

The child starts in a session (and process group) of its own and carries a
random token in its environment. When it exits, times out or is cancelled,
everything it started is killed: its process group, then every process whose
environment carries the token (a ``setsid`` or double-forked daemon leaves the
group but keeps the environment). Only then is the child reaped, so its pid
cannot be reused under us.

The loop (``_watch.watch_loop``, shared by every backend) waits on the
output pipes, a pidfd (the child's exit) and a cancellation pipe with one
``select``: no thread per stream, no polling.
"""

from __future__ import annotations

import fcntl
import os
import resource
import secrets
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, Self

from ._output import Capture
from ._watch import DRAIN_GRACE_S, Cancellation, FdWaiter, Output, OutputCallback, watch_loop

__all__ = [
    "DRAIN_GRACE_S",
    "TOKEN_VAR",
    "Cancellation",
    "OutputCallback",
    "ProcessOutcome",
    "Watched",
    "kill_marked",
    "new_token",
    "run_process",
    "stdin_file",
    "watch",
]

TOKEN_VAR = "EXECBOX_RUN_TOKEN"
_READ_SIZE = 1 << 16


def new_token() -> str:
    return secrets.token_hex(12)


@dataclass(kw_only=True)
class ProcessOutcome:
    """A finished process (or a block run like one: a zygote unit, a
    ``docker exec``); ``_result.outcome_to_result`` makes it an ``Outcome``."""

    exit_code: int
    capture: Capture
    timed_out: bool
    cancelled: bool
    duration_s: float
    memory_exceeded_mb: int | None = None  # set when the kernel killed it at a memory limit
    address_space_mb: int | None = None  # the rlimit that stood in for a memory limit, if one did:
    memory_rlimit: str = "RLIMIT_AS"  # which (RLIMIT_DATA for a runtime that reserves address space)
    gpu_memory_exceeded_mb: int | None = None  # set when execbox killed it at Limits.gpu_memory_mb
    peak_memory_mb: float | None = None  # the block's cgroup's peak, where it had one

    @classmethod
    def ended(cls, exit_code: int, watched: tuple[Capture, bool, bool], started: float) -> Self:
        """A block begun at ``started`` (``time.monotonic()``) that ended
        with ``exit_code``: ``watched`` is what the watch returned (the
        output, timed out, cancelled); a timed-out block's code is 124."""
        capture, timed_out, cancelled = watched
        return cls(
            exit_code=124 if timed_out else exit_code,
            capture=capture,
            timed_out=timed_out,
            cancelled=cancelled,
            duration_s=time.monotonic() - started,
        )


def stdin_file(data: bytes) -> int:
    """A sealed in-memory file holding ``data``, at its start: a block's
    standard input. No path is involved (nothing a block could plant), no
    writer thread (it is read like a file), and sealed, nothing can change
    it once written."""
    fd = os.memfd_create("execbox-stdin", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd
    except BaseException:
        os.close(fd)
        raise


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
    stdin: bytes | None = None,
) -> ProcessOutcome:
    """Run ``argv`` and return its exit code and bounded output.

    ``token`` marks the run's processes (made up when not given; a wrapper
    that clears the environment, like bubblewrap, must pass it on itself).
    ``preexec`` runs in the child before the exec (keep it to system calls);
    ``also_kill`` runs whenever the run's processes are killed; ``stdin``
    is its standard input (default: /dev/null).
    Exit codes: the child's own; 128+N for death by signal N; 124 on timeout.
    """
    token = token or new_token()
    started = time.monotonic()
    given = stdin_file(stdin) if stdin is not None else None
    try:
        proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if given is None else given,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env={**env, TOKEN_VAR: token},
            start_new_session=True,
            close_fds=True,
            pass_fds=tuple(pass_fds),
            preexec_fn=_with_memory_limit(memory_mb, preexec),
        )
    finally:
        if given is not None:
            os.close(given)  # the child has its own
    assert proc.stdout is not None and proc.stderr is not None
    watched = _Child(proc, token, also_kill)
    try:
        ended = watch(
            proc.stdout.fileno(),
            proc.stderr.fileno(),
            watched,
            deadline=started + timeout_s,
            output_limit=output_limit,
            cancel=cancel,
            on_output=on_output,
        )
    finally:
        watched.finish()
    code = proc.returncode
    return ProcessOutcome.ended(128 - code if code < 0 else code, ended, started)


class Watched(Protocol):
    """A running block as ``watch`` sees it."""

    exit_fd: int | None  # readable once it has ended (None: poll ``exited``)

    def exited(self) -> bool:
        """Called when ``exit_fd`` is readable, or every 10 ms without one."""

    def kill(self) -> None:
        """Kill the block and everything it started."""


def watch(
    stdout_fd: int,
    stderr_fd: int,
    watched: Watched,
    *,
    deadline: float,
    output_limit: int,
    cancel: Cancellation | None,
    on_output: OutputCallback | None,
) -> tuple[Capture, bool, bool]:
    """Read both pipes until they close, with a deadline and cancellation
    (``_watch.watch_loop``).

    When the block ends, times out or is cancelled, ``watched.kill()`` runs
    once, then what is still in the pipes is read for up to DRAIN_GRACE_S.
    Returns (capture, timed_out, cancelled)."""
    output = Output(output_limit, on_output)
    with _Pipes(stdout_fd, stderr_fd, watched, output) as pipes:
        timed_out, cancelled = watch_loop(pipes, deadline=deadline, cancel=cancel, kill_when_ended=True)
    return output.capture, timed_out, cancelled


class _Pipes:
    """A ``Watched`` block's stdout and stderr pipes and its end, as a
    ``_watch.Source``."""

    def __init__(self, stdout_fd: int, stderr_fd: int, watched: Watched, output: Output) -> None:
        self.watched = watched
        self.output = output
        self.closed = self.ended = False
        self._open = 2
        self._names = {stdout_fd: "stdout", stderr_fd: "stderr"}
        self._waiter = FdWaiter()
        for fd in (stdout_fd, stderr_fd):
            self._waiter.add(fd, self._read)
        if watched.exit_fd is not None:
            self._waiter.add(watched.exit_fd, self._exit)

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        polled = self.watched.exit_fd is None and not self.ended
        self._waiter.wait(min(timeout, 0.01) if polled else timeout, cancel)
        if polled:
            self.ended = self.watched.exited()

    def kill(self) -> None:
        self.watched.kill()

    def _read(self, fd: int) -> None:
        data = os.read(fd, _READ_SIZE)
        if data:
            self.output.feed(self._names[fd], data)
            return
        self._waiter.remove(fd)
        self._open -= 1
        self.closed = not self._open

    def _exit(self, fd: int) -> None:
        if self.watched.exited():
            self._waiter.remove(fd)
            self.ended = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self._waiter.close()


class _Child:
    """A ``subprocess.Popen`` child, watched through a pidfd."""

    def __init__(
        self, proc: subprocess.Popen[bytes], token: str, also_kill: Callable[[], None] | None = None
    ) -> None:
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


def kill_marked(
    token: str, born_after: int = 0, rounds: int = 5, spare: int = 0, descendants_of: int = 0
) -> int:
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
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _with_memory_limit(
    memory_mb: int | None, preexec: Callable[[], None] | None
) -> Callable[[], None] | None:
    """What the child runs before its exec: the address-space limit first
    (set from outside after the start, a program could allocate before it
    held), then the caller's ``preexec``."""
    if not memory_mb:
        return preexec
    limit = memory_mb * 1024 * 1024

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if preexec is not None:
            preexec()

    return limited


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
