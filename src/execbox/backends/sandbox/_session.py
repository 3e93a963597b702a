"""The sandbox's stateful session, host side (``SandboxExecutor(stateful=True)``):
one pool box kept for the executor, whose code process runs every block
in one interpreter (``_zygote/session.py``), and each block's answer (what
it becomes: ``_session_outcome``).

Why not ipykernel in the jail: its own cost is ~3 ms a cell here (the
jailed kernel's round trip 4.3 ms); a box's socket, two pipes and one
``exec`` cost a fraction of that.

A box claimed from the pool (``ZygotePool.claim``) is told ``session``
on its code socket and ``go`` on its init's, with the status socket. Then
per block: a JSON request and the block's stdout and stderr on the code
socket; ``exit N NONCE`` back (with a memfd of displays when there are
any), after the session has closed its ends of the pipes. The nonce ties
each answer to its request (``_session_block``, which reads them): a block
that answers for itself cannot make the session hand a later block its result. ``int`` on the status
socket makes the init send SIGINT to the session (a timeout, a cancel): the
block ends with ``KeyboardInterrupt`` and the state stays; if no answer
comes within INTERRUPT_GRACE_S, the box is killed and the next block gets
a fresh one. The session dying (``os._exit``, a signal, the memory limit)
shows as EOF on the code socket; the init then reports its exit status.
The session's box is the session's alone: closed with it, never reused.
"""

from __future__ import annotations

import functools
import json
import os
import select
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...jail import BlockGroup, GpuWatcher, Lease, give_pipe, no_watch, recv_fds_now, send_fds_now
from .._process import Cancellation, Capture, OutputCallback, ProcessOutcome, stdin_file, watch
from ._pool import KILLED, ZygotePool, exit_status
from ._session_block import SessionBlock, new_nonce

__all__ = ["INTERRUPT_GRACE_S", "Answer", "Session", "sent_whole"]

INTERRUPT_GRACE_S = 3.0
INLINE_MAX = 64 << 10  # a block's text sent whole, JSON-encoded (the session reads at most 128 KiB)
PATH_MAX = 4096  # kept free for the rest of a request (a path, escaped in JSON, fits the 128 KiB)

KEPT = "The session was interrupted; its state (variables, imports) is kept."
FULL = (
    "The Python session could not take this block: earlier blocks hold every file descriptor it may "
    "open (SandboxExecutor(max_open_files=...)); it ran in a fresh session, and the variables and "
    "imports of earlier blocks are lost."
)
NOMEM = (
    "The Python session could not take this block: earlier blocks hold all the memory it may use "
    "(Limits.memory_mb); it ran in a fresh session, and the variables and imports of earlier blocks are lost."
)
OUT_OF_STEP = (
    "out of step with its requests: an earlier block answered for itself on the session's socket, and "
    "its true answer came while this block waited; this block may have run in part"
)
LOST_INTERRUPT = (
    "The session did not stop on interrupt (Limits.timeout_s) and was restarted: "
    "its state (variables, imports) is lost."
)


@dataclass
class Answer:
    """One block's run in the session."""

    process: ProcessOutcome
    displays: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""  # what happened to the session, for the output
    died: str | None = None  # how the session died during the block
    dropped: int = 0  # displays the session dropped past Limits.max_output_bytes


class Session:
    """One session: a box of ``pool`` kept; ``run`` one block at a time."""

    def __init__(self, pool: ZygotePool, owner: Lease | None, gpu_watch: GpuWatcher = no_watch) -> None:
        self.pool = pool
        self.owner = owner
        self.gpu_watch = gpu_watch  # Limits.gpu_memory_mb in a GPU session (_gpu)
        self._code: socket.socket | None = None
        self._status: socket.socket | None = None
        self._group: BlockGroup | None = None

    @property
    def group(self) -> BlockGroup | None:
        return self._group

    def open(self) -> None:
        """Claim a box and make it a session (another one if it died waiting)."""
        try:
            self._open()
        except OSError:
            self._open()

    def _open(self) -> None:
        box, code, group = self.pool.claim()
        status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            send_fds_now(code, b"session")
            send_fds_now(box, b"go", [theirs.fileno()])
        except OSError:
            status.close()
            code.close()
            if group is not None:
                group.remove()
            raise
        finally:
            box.close()
            theirs.close()
        self._code, self._status, self._group = code, status, group

    def close(self) -> None:
        """End the session: its box's init leaves, and the box's namespaces with it."""
        for sock in (self._status, self._code):
            if sock is not None:
                sock.close()
        if self._group is not None:
            self._group.kill()
            self._group.remove()
        self._code = self._status = self._group = None

    def gone(self) -> str | None:
        """Whether the session died since its last block: how, else None."""
        if self._status is None:
            return None
        try:
            message = self._status.recv(64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None
        except OSError:
            message = b""
        return _how(exit_status(message), self._group)

    def run(
        self,
        request: Mapping[str, Any],
        *,
        timeout_s: float,
        output_limit: int,
        memory_mb: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: bytes | None = None,
    ) -> Answer:
        """Run one block (the session opened first if need be). A session
        that cannot take the block (an earlier one holds every descriptor it
        may open) is replaced, and the block runs in the fresh one.
        ``stdin``: the block's standard input, a sealed memfd sent with it."""
        attempt = functools.partial(
            self._run,
            request,
            timeout_s=timeout_s,
            output_limit=output_limit,
            memory_mb=memory_mb,
            cancel=cancel,
            on_output=on_output,
            stdin=stdin,
        )
        answer = attempt()
        if answer.note not in (FULL, NOMEM):
            return answer
        again = attempt()
        again.note = again.note or answer.note
        return again

    def _run(
        self,
        request: Mapping[str, Any],
        *,
        timeout_s: float,
        output_limit: int,
        memory_mb: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: bytes | None,
    ) -> Answer:
        if self._code is None:
            self.open()
        assert self._code is not None and self._status is not None
        started = time.monotonic()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        given = stdin_file(stdin) if stdin is not None else None
        try:
            for fd in (out_w, err_w):
                give_pipe(fd, self.owner)
            nonce = self._send(request, output_limit, [out_w, err_w, *([given] if given is not None else [])])
            os.close(out_w)
            os.close(err_w)
            if given is not None:
                os.close(given)
                given = None
            watched = SessionBlock(self._code, self._status, nonce)
            with self.gpu_watch(self._group) as gpu:
                ended = watch(
                    out_r,
                    err_r,
                    watched,
                    deadline=started + timeout_s,
                    output_limit=output_limit,
                    cancel=cancel,
                    on_output=on_output,
                )
        finally:
            os.close(out_r)
            os.close(err_r)
            if given is not None:
                os.close(given)
        gpu_exceeded_mb = gpu.limit_mb if gpu is not None and gpu.exceeded else None
        return self._answer(watched, ended, started, memory_mb, output_limit, gpu_exceeded_mb)

    def _send(self, request: Mapping[str, Any], output_limit: int, fds: list[int]) -> str:
        """Send a block's request with its pipes (and stdin); its nonce."""
        assert self._code is not None
        self._drain()
        if "code" in request and not sent_whole(request["code"]):
            # one SOCK_SEQPACKET message must fit the send buffer: a large block is read from
            # its file, in the jail (where .execbox/ is read-only). The same rule as the
            # executor's, which then wrote the file: a text it did not write is always sent.
            request = {k: v for k, v in request.items() if k != "code"}
        nonce = new_nonce()  # what ties the answers to this request (_session_block)
        data = json.dumps({**request, "nonce": nonce, "displays_max": output_limit}).encode()
        try:
            send_fds_now(self._code, data, fds)
        except OSError:
            pass  # it died meanwhile (EOF follows), or takes nothing (the block's timeout ends it)
        return nonce

    def _answer(
        self,
        watched: SessionBlock,
        ended: tuple[Capture, bool, bool],
        started: float,
        memory_mb: int,
        output_limit: int,
        gpu_exceeded_mb: int | None,
    ) -> Answer:
        """What the block's run (``ended``: what ``watch`` saw) comes to;
        the session closed where it cannot take the next block."""
        capture, timed_out, cancelled = ended

        def process(code: int) -> ProcessOutcome:
            return ProcessOutcome(
                exit_code=code,
                capture=capture,
                timed_out=timed_out,
                cancelled=cancelled,
                duration_s=time.monotonic() - started,
            )

        note = ""
        if watched.interrupted_at is not None and not watched.answered:
            watched.wait_answer(watched.interrupted_at + INTERRUPT_GRACE_S)
            note = KEPT if watched.answered and not watched.eof else LOST_INTERRUPT
        elif timed_out or cancelled:
            note = KEPT
        if watched.stale:  # an earlier block answered for itself: ended, rather than out of step
            self.close()
            return Answer(process(KILLED), died=OUT_OF_STEP)
        if watched.forged is not None:  # the block lied on the session's socket: that session ends
            self.close()
            why = (
                f"The block wrote on its session's socket ({watched.forged}): the session was ended, and a "
                "fresh one runs the next block; variables and imports of earlier blocks are lost."
            )
            return Answer(process(1), note=why)
        if watched.full:
            self.close()
            return Answer(
                ProcessOutcome(
                    exit_code=KILLED, capture=capture, timed_out=False, cancelled=False, duration_s=0.0
                ),
                note=NOMEM if watched.nomem else FULL,
            )
        died = None
        if watched.eof:  # the session died: its init reports how
            watched.code = self._wait_status()
            died = _how(watched.code, self._group)
            note = ""
        outcome = process(124 if timed_out else (watched.code if watched.code is not None else KILLED))
        if self._group is not None and died is not None and self._group.oom_killed():
            outcome.memory_exceeded_mb = memory_mb
        outcome.gpu_memory_exceeded_mb = gpu_exceeded_mb
        if died is not None or note == LOST_INTERRUPT:
            self.close()  # the next block opens a fresh one
        displays = watched.read_displays(output_limit)
        if watched.problem is not None:
            note = f"{note} [{watched.problem}]".strip()
        return Answer(outcome, displays, note, died, watched.dropped)

    def _drain(self) -> None:
        """Drop what an earlier block left on the code socket: the block's
        process holds it, so it may have written lines of its own there (the
        true answer then came after them, and waits here)."""
        assert self._code is not None
        for _ in range(256):  # bounded: a thread a block left behind may write without end
            try:
                data, fds = recv_fds_now(self._code, 64, 4)
            except OSError:  # BlockingIOError: nothing left
                return
            for fd in fds:
                os.close(fd)
            if not data:
                return

    def _wait_status(self) -> int | None:
        assert self._status is not None
        ready, _, _ = select.select([self._status], [], [], 2.0)
        if not ready:
            return None
        try:
            return exit_status(self._status.recv(64))
        except OSError:
            return None


def sent_whole(code: str) -> bool:
    """Whether a block's text goes whole in its request (a unit's code
    process, a session): its file is not read then."""
    return len(code) <= INLINE_MAX and len(json.dumps(code)) <= INLINE_MAX - PATH_MAX


def _how(code: int | None, group: BlockGroup | None) -> str:
    if group is not None and group.oom_killed():
        return "killed at the memory limit (Limits.memory_mb)"
    if code is None:
        return "no exit status"
    return f"signal {code - 128}" if code > 128 else f"exit code {code}"
