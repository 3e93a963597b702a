"""The sandbox's warm pool, host side: one long-lived jail per executor
holding a zygote interpreter (see ``_zygote/zygote.py``), the *boxes* it
made (``_zygote/box.py``: a jail kept for block after block, cleaned between
them), and the run of one block in one of them.

The host asks the zygote for a box over a SOCK_SEQPACKET pair (``box``, with
the cgroup.procs files of the box's cgroup) and gets the box's socket back.
On it the box's init says ``ready`` with the socket of a code process
waiting for its block. A block goes straight to that code process: a JSON
request with its status socket and the write ends of its stdout and stderr
pipes; the init gets ``go`` and the status socket. The box writes ``exit N``
on the status socket; the host writes ``kill`` (or closes it) to end the
block. The box then cleans itself and says ``ready`` again, or leaves (the
box thrown away) when something was not as it should be.

``size`` boxes are made at the start and kept; callers that find none ready
have more made, one each, up to MAX_SIZE, and boxes beyond ``size`` are let
go after SPARE_IDLE_S unused. One thread (the watcher) takes the zygote's
new boxes and the boxes' ``ready``; callers wait on a condition.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._errors import BackendUnavailableError, StallError
from ...jail import BlockCgroup, BlockCounts, BlockShare, Box, Launch, Lease, give_pipe, send_fds_now
from .._process import Cancellation, OutputCallback, ProcessOutcome, stdin_file, watch
from ._unit import KILLED, Unit, exit_status
from ._zygote_jail import ZYGOTE_INSIDE, ZYGOTE_SOURCE, ZygoteJail

__all__ = ["KILLED", "ZYGOTE_INSIDE", "ZYGOTE_SOURCE", "ZygotePool", "exit_status"]

# The longest waits on the zygote and a box: a box is made in a few ms (a
# fork and namespaces), cleaned in less; past these it is taken for stuck.
UNIT_WAIT_S = 15.0
MAX_SIZE = 64  # boxes at most: each is two waiting processes and a cgroup
SPARE_IDLE_S = 5.0  # boxes beyond the pool's size, unused this long, are let go
UNSTARTED_TRIES = 3  # a block whose box died before it started goes to another, this often at most


class ZygotePool:
    """A zygote in a jail and the boxes it made.

    ``launcher`` makes the zygote's jail launch from its command
    (``_launcher.prepare`` with the zygote's policy: its folder bound at
    ZYGOTE_INSIDE); ``config`` what every block shares; ``make_cgroup`` makes
    the cgroup of one box (None: no cgroups here).

    No wait on the zygote or a box is without a deadline: a zygote that does
    not take a request within SEND_WAIT_S, or no box that comes (made, or
    cleaned) within UNIT_WAIT_S while callers wait, is taken for stuck,
    stopped and started afresh; twice in a row raises ``StallError``. A
    caller waits without a deadline only while every box runs a block (the
    blocks' own timeouts bound that)."""

    def __init__(
        self,
        launcher: Callable[[Sequence[str]], Launch],
        python: str,
        cwd: str,
        config: Mapping[str, Any],
        *,
        size: int,
        make_cgroup: Callable[[], BlockCgroup | None],
        owner: Lease | None = None,
    ) -> None:
        self.launcher = launcher
        self.python = python
        self.cwd = cwd
        self.config = dict(config)
        self.size = size
        self.make_cgroup = make_cgroup
        self.owner = owner  # the jail id, which must own the blocks' output pipes
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a box came, was made or went
        self._jail: ZygoteJail | None = None
        self._asked: deque[BlockCgroup | None] = deque()  # cgroups of boxes asked for, in order
        self._idle: deque[Box] = deque()  # ready for a block
        self._cleaning: set[Box] = set()  # made, or after a block: waiting for their init's ready
        self._running = 0  # boxes taken whose block has not ended
        self._waiting = 0  # callers waiting for a box
        self._since = time.monotonic()  # the last box the zygote made or a box's init made ready
        self._closed = False
        self._started = False
        self._watcher: threading.Thread | None = None
        self._wake_r, self._wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._counts = {
            "boxes_made": 0,
            "boxes_replaced": 0,
            "refills_failed": 0,
            "zygote_restarts": 0,
            "stalls": 0,
        }

    def health(self) -> dict[str, Any]:
        """What the pool holds and what went wrong so far (doctor, ``/v1/info``)."""
        with self._lock:
            return {
                "size": self.size,
                "alive": self._jail is not None,
                "boxes": len(self._idle) + len(self._cleaning) + self._running,
                "boxes_ready": len(self._idle),
                "boxes_cleaning": len(self._cleaning),
                "boxes_asked": len(self._asked),
                "blocks_running": self._running,
                **self._counts,
            }

    @property
    def _proc(self) -> subprocess.Popen[bytes] | None:
        """The zygote's jail process (tests kill and stop it)."""
        return self._jail.proc if self._jail is not None else None

    def start(self) -> None:
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        self._jail = ZygoteJail(self.launcher, self.python, self.cwd, self.config)
        if self._started:
            self._counts["zygote_restarts"] += 1
        self._started = True
        self._since = time.monotonic()
        for _ in range(self.size):
            self._ask(self.make_cgroup())
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._watch, name="execbox-sandbox-boxes", daemon=True)
            self._watcher.start()
        self._wake()

    def stop(self) -> None:
        # the watcher leaves first: a descriptor closed under a thread in select() does not wake it
        with self._lock:
            self._closed = True
            self._changed.notify_all()
        self._wake()
        if self._watcher is not None:
            self._watcher.join()
            self._watcher = None
        with self._lock:
            self._stop_locked()
        for fd in (self._wake_r, self._wake_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _wake(self) -> None:
        """Have the watcher look again (a box to watch, or the pool closing)."""
        try:
            os.write(self._wake_w, b"w")
        except OSError:
            pass  # a wake-up is already pending (or the pool is closed)

    def _stop_locked(self, stuck: bool = False) -> None:
        """Stop the zygote (``stuck``: at once) and let go of every box not taken."""
        if self._jail is not None:
            self._jail.stop(stuck)
            self._jail = None
        for box in (*self._idle, *self._cleaning):
            box.close()
        self._idle.clear()
        self._cleaning.clear()
        for group in self._asked:
            if group is not None:
                group.remove()
        self._asked.clear()
        self._changed.notify_all()

    def _tail(self) -> str:
        return self._jail.tail() if self._jail is not None else "(no log)"

    def _ask(self, group: BlockCgroup | None) -> None:
        """Ask the zygote for one more box (it answers with its socket)."""
        assert self._jail is not None
        self._jail.ask(group)
        self._asked.append(group)

    def _watch(self) -> None:
        """The watcher: takes the boxes the zygote makes and the ``ready``
        of boxes cleaned after a block; lets go of boxes that left and of
        spare boxes unused for SPARE_IDLE_S; asks for boxes to keep ``size``."""
        while True:
            with self._lock:
                if self._closed:
                    return
                control = self._jail.control if self._jail is not None else None
                watched: list[Any] = [self._wake_r, *([control] if control is not None else [])]
                watched += [box.sock for box in self._cleaning]
            try:
                readable, _, _ = select.select(watched, [], [], 1.0)
            except (OSError, ValueError):
                readable = []  # a socket closed under us (the pool stopping): look again
            with self._lock:
                if self._closed:
                    return
                if self._wake_r in readable:
                    try:
                        os.read(self._wake_r, 4096)
                    except OSError:
                        pass
                if control in readable and self._jail is not None and control is self._jail.control:
                    self._receive_boxes()
                for box in [box for box in self._cleaning if box.sock in readable]:
                    self._settle(box)
                self._let_spares_go()
                self._refill()

    def _receive_boxes(self) -> None:
        """Every box the zygote has handed over, to wait for its ready."""
        assert self._jail is not None
        while self._asked:
            try:
                sock = self._jail.receive()
            except OSError:  # gone, or talking nonsense: the next caller starts one
                self._stop_locked(stuck=True)
                return
            if sock is None:
                return
            self._cleaning.add(Box(sock, self._asked.popleft()))
            self._counts["boxes_made"] += 1
            self._since = time.monotonic()

    def _settle(self, box: Box) -> None:
        ready = box.take_ready()
        if ready is False:
            return
        self._cleaning.discard(box)
        if ready:
            self._idle.append(box)
            self._since = time.monotonic()
        else:  # its init left: something was not as it should be after a block, or retired
            box.close()
            self._counts["boxes_replaced"] += 1
        self._changed.notify_all()

    def _let_spares_go(self) -> None:
        now = time.monotonic()
        while len(self._idle) + len(self._cleaning) + self._running > self.size and self._idle:
            if now - self._idle[0].idle_since < SPARE_IDLE_S:
                return
            self._idle.popleft().close()

    def _refill(self) -> None:
        """Boxes asked for to keep ``size`` (boxes left: replaced)."""
        while (
            self._jail is not None
            and len(self._idle) + len(self._cleaning) + self._running + len(self._asked) < self.size
        ):
            try:
                self._ask(self.make_cgroup())
            except Exception:  # noqa: BLE001 (a cgroup refused now, a zygote stuck: a caller's take says why)
                self._counts["refills_failed"] += 1
                return

    def _take(self) -> Box:
        """A ready box (the zygote restarted once if it died or got stuck)."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    return self._take_locked()
                except (OSError, IndexError) as exc:
                    tail = self._tail()
                    if isinstance(exc, StallError):
                        self._counts["stalls"] += 1
                    self._stop_locked(stuck=isinstance(exc, StallError))
                    self._wake()  # the watcher lets go of the descriptors just closed
                    if attempt == 2:
                        if isinstance(exc, StallError):
                            raise StallError(
                                f"{exc}, twice in a row (the zygote was started afresh in between): {tail}",
                                waiting_for=exc.waiting_for,
                            ) from exc
                        raise BackendUnavailableError(
                            "sandbox", f"the sandbox pool died and could not be restarted: {exc}: {tail}"
                        ) from exc
            raise AssertionError("unreachable")

    def _take_locked(self) -> Box:
        if self._closed:
            raise BackendUnavailableError("sandbox", "the sandbox pool is closed")
        if self._jail is not None and self._jail.gone():
            # every box it made died with it, ready or not: start afresh rather than hand one out
            raise OSError("the sandbox pool's zygote is gone")
        if self._jail is None:
            self._start_locked()
        self._waiting += 1
        begun = time.monotonic()
        try:
            while not self._idle:
                if self._closed:
                    raise BackendUnavailableError("sandbox", "the sandbox pool is closed")
                if self._jail is None:
                    raise OSError("the sandbox pool's zygote is gone")
                coming = len(self._asked) + len(self._cleaning)
                total = coming + len(self._idle) + self._running
                if self._waiting > coming and total < MAX_SIZE:  # one more box, for this caller
                    self._ask(self.make_cgroup())
                    self._wake()
                    coming += 1
                # no deadline while every box runs a block (their timeouts bound it); else one
                # on the zygote or a box's cleaning, counted from the later of this wait and the
                # last box that came
                if coming:
                    stalled = time.monotonic() - max(begun, self._since)
                    if stalled >= UNIT_WAIT_S:
                        raise StallError(
                            f"waited {stalled:.1f} s for a box from the sandbox pool's zygote in vain",
                            waiting_for="a box from the sandbox pool's zygote",
                        )
                    self._changed.wait(UNIT_WAIT_S - stalled)
                else:
                    self._changed.wait(1.0)
            box = self._idle.pop()  # the last one ready: the spares stay unused, and go
            self._running += 1
            return box
        finally:
            self._waiting -= 1

    def _release(self, box: Box, reuse: bool) -> None:
        """A block's box back from its block: to the watcher for its ready
        (``reuse`` False: let go, the watcher makes another)."""
        with self._lock:
            self._running -= 1
            if reuse and not self._closed and self._jail is not None:
                box.blocks += 1
                self._cleaning.add(box)
            else:
                box.close()
            self._changed.notify_all()
        self._wake()

    def claim(self) -> tuple[socket.socket, socket.socket, BlockShare | None]:
        """A ready box the caller keeps (a stateful session, ``_session``):
        its init's socket, its code process's, its cgroup (the caller's to
        remove: ``remove`` on this share removes it); the pool makes another
        in its place."""
        box = self._take()
        assert box.code is not None
        with self._lock:
            self._running -= 1
            self._changed.notify_all()
        self._wake()  # the watcher asks for a replacement
        if box.share is not None:
            box.share.begin()
            box.share.owned = True
        code, box.code = box.code, None
        return box.sock, code, box.share

    def run(
        self,
        request: Mapping[str, Any],
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: bytes | None = None,
    ) -> tuple[ProcessOutcome, BlockCounts | None]:
        """Run one block in a ready box: its outcome (as ``run_process``
        gives it) and what the box's cgroup counted for it. ``stdin``: the
        block's standard input (a sealed memfd sent with the request;
        default /dev/null)."""
        started = time.monotonic()
        data = json.dumps(request).encode()
        given = stdin_file(stdin) if stdin is not None else None
        try:
            for attempt in range(1, UNSTARTED_TRIES + 1):
                outcome, counts, ran = self._run_once(
                    data,
                    started,
                    timeout_s=timeout_s,
                    output_limit=output_limit,
                    cancel=cancel,
                    on_output=on_output,
                    stdin=given,
                )
                if ran or attempt == UNSTARTED_TRIES:
                    return outcome, counts
                # the box died before the block's first line (its zygote or jail went): in another
            raise AssertionError("unreachable")
        finally:
            if given is not None:
                os.close(given)

    def _send(self, data: bytes, stdin: int | None) -> tuple[Box, socket.socket, int, int]:
        """A box given the block: (box, status socket, stdout and stderr read ends)."""
        while True:
            box = self._take()
            assert box.code is not None
            if box.share is not None:
                box.share.begin()
            status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            for fd in (out_w, err_w):
                give_pipe(fd, self.owner)
            try:
                # A code process reads its one message at once: a full socket is a box gone wrong
                send_fds_now(
                    box.code, data, [theirs.fileno(), out_w, err_w, *([stdin] if stdin is not None else [])]
                )
                send_fds_now(box.sock, b"go", [theirs.fileno()])
                return box, status, out_r, err_r
            except OSError:  # that box died while waiting: take another
                for fd in (out_r, err_r):
                    os.close(fd)
                status.close()
                self._release(box, reuse=False)
            finally:
                if box.code is not None:
                    box.code.close()
                    box.code = None
                theirs.close()
                os.close(out_w)
                os.close(err_w)

    def _run_once(
        self,
        data: bytes,
        started: float,
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: int | None,
    ) -> tuple[ProcessOutcome, BlockCounts | None, bool]:
        """One try: (outcome, what the cgroup counted, whether the block started)."""
        box, status, out_r, err_r = self._send(data, stdin)
        counts: BlockCounts | None = None
        try:
            watched = Unit(status, box.share)
            # the block's time starts now: a wait for a box (callers beyond the pool) is not its own
            capture, timed_out, cancelled = watch(
                out_r,
                err_r,
                watched,
                deadline=time.monotonic() + timeout_s,
                output_limit=output_limit,
                cancel=cancel,
                on_output=on_output,
            )
            exit_code = 124 if timed_out else (watched.code if watched.code is not None else KILLED)
            if box.share is not None:  # before the box goes back: the next block's begin resets them
                counts = box.share.counts(oom=exit_code != 0)
        finally:
            status.close()  # the box's init: the block is over (if it did not see it end itself)
            os.close(out_r)
            os.close(err_r)
            self._release(box, reuse=True)
        ran = watched.started or timed_out or cancelled
        return (
            ProcessOutcome(
                exit_code=exit_code,
                capture=capture,
                timed_out=timed_out,
                cancelled=cancelled,
                duration_s=time.monotonic() - started,
            ),
            counts,
            ran,
        )
