"""One block as a ``docker exec`` in a running container: output, deadline,
cancellation, and no process left behind inside the container.

The block runs under a small ``sh`` wrapper that carries a random token in
its environment. Before the block, when no other block runs, the wrapper
empties what an earlier block could leave outside the workspace (/tmp,
/dev/shm, /dev/mqueue, SysV IPC objects). When the block's command returns,
the wrapper counts the container's processes (a glob over /proc, no fork);
only when more than the container's own are left does it run the
in-container killer, which kills every process carrying the token, every
orphan (adopted by the container's init) that carries no other block's
token, and their descendants. On a timeout or a cancellation the same
killer runs in an exec of its own; if even that cannot start (a fork bomb
has used up the pids limit), the container itself is killed.

The engine multiplexes stdout and stderr on one socket, in order; it is
read on the calling thread, so the interleaving survives.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ..._docker_engine import engine_errors
from ..._errors import BackendUnavailableError
from .._output import Capture
from .._process import TOKEN_VAR, Cancellation, OutputCallback, ProcessOutcome, new_token
from .._watch import FdWaiter, Output, watch_loop

__all__ = [
    "IPC_SWEEP_FILE",
    "KILLER_FILE",
    "WRAPPER_FILE",
    "ContainerGone",
    "exec_output",
    "kill_leftovers",
    "memory_kills",
    "open_exec",
    "program",
    "run_exec",
    "split_frames",
]

# The programs run inside the container, beside this module (the container
# does not see execbox's files: their texts go in the exec's argv and
# environment): the block's wrapper, the killer and the SysV IPC sweep.
WRAPPER_FILE, KILLER_FILE, IPC_SWEEP_FILE = "_wrapper.sh", "_agent/killer.py", "_agent/ipc_sweep.py"

_HEADER = struct.Struct(">BxxxL")
KILL_TIMEOUT_S = 5.0


@functools.cache
def program(name: str) -> str:
    """The text of the in-container program ``name`` (a file beside this
    module), read when first needed."""
    return (Path(__file__).parent / name).read_text(encoding="utf-8")


class ContainerGone(Exception):
    """The container stopped (or vanished) under a block."""


def run_exec(
    client: Any,
    container_id: str,
    argv: Sequence[str],
    *,
    env: dict[str, str],
    workdir: str,
    timeout_s: float,
    output_limit: int,
    cancel: Cancellation | None,
    on_output: OutputCallback | None,
    kill_container: Callable[[], None],
    live_tokens: set[str],
) -> ProcessOutcome:
    """Run ``argv`` in the container; exit codes as ``run_process`` gives
    them (124 on timeout). ``live_tokens``: the tokens of the executor's
    running blocks (this one's is added while it runs). Raises
    ContainerGone if the container is not running."""
    started = time.monotonic()
    with _live(live_tokens) as (token, others):
        environment = {
            **env,
            TOKEN_VAR: token,
            "EXECBOX_KILLER": program(KILLER_FILE),
            "EXECBOX_IPC_SWEEP": program(IPC_SWEEP_FILE),
            "EXECBOX_LIVE_TOKENS": " ".join(others),
        }
        with engine_errors("the block could not be started in the container", gone=ContainerGone):
            exec_id, raw = open_exec(
                client,
                container_id,
                ["/bin/sh", "-c", program(WRAPPER_FILE), "execbox", *argv],
                environment=environment,
                workdir=workdir,
            )
        try:
            ended = _read_frames(
                raw,
                deadline=started + timeout_s,
                output_limit=output_limit,
                cancel=cancel,
                on_output=on_output,
                kill=lambda: _kill_block(client, container_id, [token, *others], kill_container),
            )
        finally:
            raw.close()
        try:
            with engine_errors("the block's exit status could not be read", gone=ContainerGone):
                code = client.api.exec_inspect(exec_id).get("ExitCode")
        except (ContainerGone, BackendUnavailableError):
            code = None
        return ProcessOutcome.ended(137 if code is None else code, ended, started)  # 137: it went away


@contextlib.contextmanager
def _live(live_tokens: set[str]) -> Iterator[tuple[str, list[str]]]:
    """A new block's token, in ``live_tokens`` while the block runs, and
    the tokens of the blocks running beside it."""
    token = new_token()
    others = sorted(live_tokens)
    live_tokens.add(token)
    try:
        yield token, others
    finally:
        live_tokens.discard(token)


def open_exec(
    client: Any, container_id: str, argv: Sequence[str], **options: Any
) -> tuple[str, socket.socket]:
    """Create and start an exec; its id and the socket of its output.

    Its stdin is the attached stream, closed at once (the process reads
    end of file), never the engine's default: the host's /dev/null, which
    runsc gives to the container's user (the host's /dev/null became
    65534's after every exec under gVisor)."""
    exec_id = client.api.exec_create(container_id, list(argv), stdin=True, **options)["Id"]
    sock = client.api.exec_start(exec_id, socket=True)
    raw = getattr(sock, "_sock", sock)
    try:
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        raw.close()
        raise
    return exec_id, raw


def exec_output(client: Any, container_id: str, argv: Sequence[str], timeout_s: float = 30.0) -> str:
    """What a short command prints on stdout (``open_exec``'s stdin)."""
    _, raw = open_exec(client, container_id, argv)
    raw.settimeout(timeout_s)
    data = b""
    try:
        while chunk := raw.recv(1 << 16):
            data += chunk
    finally:
        raw.close()
    frames, _ = split_frames(data)
    return b"".join(payload for kind, payload in frames if kind == 1).decode(errors="replace")


def split_frames(buffer: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """The engine's whole frames in ``buffer`` (stream 1 stdout, 2 stderr;
    8-byte header: stream, size), and what is left of a frame still coming."""
    frames = []
    while len(buffer) >= _HEADER.size:
        kind, size = _HEADER.unpack_from(buffer)
        if len(buffer) < _HEADER.size + size:
            break
        frames.append((kind, buffer[_HEADER.size : _HEADER.size + size]))
        buffer = buffer[_HEADER.size + size :]
    return frames, buffer


def memory_kills(client: Any, container_id: str) -> int | None:
    """How many times the kernel's OOM killer has struck in the container
    (cgroup v1 or v2), or None when it cannot be read."""
    try:
        text = exec_output(
            client,
            container_id,
            [
                "/bin/sh",
                "-c",
                "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || "
                "cat /sys/fs/cgroup/memory.events 2>/dev/null",
            ],
        )
    except Exception:  # noqa: BLE001 - a best-effort reading
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def kill_leftovers(client: Any, container_id: str, kill_container: Callable[[], None]) -> None:
    """Kill every orphan in the container (none of the executor's blocks
    runs): what a finished block's fork bomb left behind."""
    _kill_block(client, container_id, [new_token()], kill_container)


def _kill_block(
    client: Any, container_id: str, tokens: list[str], kill_container: Callable[[], None]
) -> None:
    """The in-container killer (``tokens``: the block's, then the live
    ones), given KILL_TIMEOUT_S; when it cannot start (no pid left, no
    python3), fails or hangs, the container is killed."""
    try:
        exec_id, raw = open_exec(
            client, container_id, ["python3", "-I", "-c", program(KILLER_FILE), *tokens], workdir="/"
        )
        raw.settimeout(KILL_TIMEOUT_S)
        try:
            while raw.recv(1 << 16):
                pass
        finally:
            raw.close()
        if client.api.exec_inspect(exec_id).get("ExitCode") == 0:
            return
    except Exception:  # noqa: BLE001 - the fallback below covers every failure
        pass
    kill_container()


def _read_frames(
    sock: socket.socket,
    *,
    deadline: float,
    output_limit: int,
    cancel: Cancellation | None,
    on_output: OutputCallback | None,
    kill: Callable[[], None],
) -> tuple[Capture, bool, bool]:
    """Read the engine's multiplexed stream in arrival order until it ends
    (``_watch.watch_loop``); on the deadline or a cancellation, run ``kill``
    once and read what is left for up to DRAIN_GRACE_S. No kill when the
    block ends: the wrapper has killed what it left."""
    output = Output(output_limit, on_output)
    with FdWaiter() as waiter:
        frames = _Frames(sock, waiter, output, kill)
        timed_out, cancelled = watch_loop(frames, deadline=deadline, cancel=cancel)
    return output.capture, timed_out, cancelled


class _Frames:
    """An exec's output socket as a ``_watch.Source``: it ends (and the
    block with it) when the engine closes the stream."""

    def __init__(
        self, sock: socket.socket, waiter: FdWaiter, output: Output, kill: Callable[[], None]
    ) -> None:
        self.sock, self.output, self.kill = sock, output, kill
        self.closed = self.ended = False
        self._buffer = b""
        self._waiter = waiter
        waiter.add(sock.fileno(), self._read)

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        self._waiter.wait(timeout, cancel)

    def _read(self, fd: int) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            self._waiter.remove(fd)
            self.closed = self.ended = True
            return
        frames, self._buffer = split_frames(self._buffer + data)
        for kind, payload in frames:
            self.output.feed("stdout" if kind == 1 else "stderr", payload)
