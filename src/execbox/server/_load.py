"""Admission: how many executions run, a bounded line of those that wait
for a slot, and the 429 past it (never a request left hanging).

A request that runs code takes a slot with ``enter``: at once when one is
free, else it waits in line (first come, first served) for at most
``max_wait_s``; when the line already holds ``max_queued`` requests, or the
wait runs out, it gets a 429 whose ``Retry-After`` is how long the line now
takes to clear at the pace slots have been freed lately. A batch is
admitted with one ``enter``; its other requests then wait for slots without
a deadline (``acquire``: the batch's own width bounds them). A freed slot
passes straight to the first in line, so a late caller cannot overtake.

A waiter that is cancelled leaves the line at once (counted: ``abandoned``),
and one handed a slot as it was cancelled passes the slot on. The routes
wait in line under ``_disconnect.unless_gone`` (``in_slot``), so a request
whose client went away leaves the line then and never takes a slot (issue
42: 16 abandoned runs held the 8 slots and their line, and each took a slot
in its turn before it was cancelled; the next run waited 29 s).

Defaults (``ServerConfig``): a line of 8x ``max_concurrency`` and 30 s, so a
burst of 8x the concurrency of short runs all finishes, none refused.

The counts are the whole server's: kept on a ``Board`` that the worker
processes share (``_board.py``); each worker keeps its own waiters, and a
slot freed anywhere goes to the line that has waited longest.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ._board import Board
from ._errors import ApiError

__all__ = ["Load", "busy"]

# the most a Retry-After says (a line that clears slower than this is best
# asked again then, when the pace is known better)
MAX_RETRY_AFTER_S = 60

T = TypeVar("T")


def busy(message: str, retry_after_s: int = 1) -> ApiError:
    return ApiError(429, "busy", message, retryable=True, headers={"Retry-After": str(max(1, retry_after_s))})


class Load:
    """Slots (``max_running``), the line for them (``max_queued`` long, each
    waiting ``max_wait_s`` at most) and the count of requests waiting for
    their session's running execution (``line_waits``, shown as queued), as
    worker ``me`` of the processes sharing ``board`` sees them."""

    def __init__(
        self,
        max_running: int,
        max_queued: int = 0,
        max_wait_s: float = 0.0,
        board: Board | None = None,
        me: int = 0,
    ) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.board = board or Board(1)
        self.me = me
        self.line_waits = 0
        self._line: deque[_Waiter] = deque()  # each counted on the board as waiting here

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take the slots other workers hand over (on ``loop``, the server's)."""
        fd = self.board.wake_fd(self.me)
        if fd is not None:
            loop.add_reader(fd, self._take_handed, fd)

    @property
    def running(self) -> int:
        return self.board.running()

    @property
    def queued(self) -> int:
        """Requests waiting: for a slot, or for their session's running execution."""
        return self.in_line + self.line_waits

    @property
    def in_line(self) -> int:
        return self.board.in_line()

    @property
    def admitted(self) -> int:
        """Slots given to requests since the server started (all its workers')."""
        return self.board.admitted()

    @property
    def abandoned(self) -> int:
        """Requests that left the line cancelled, before a slot (their client went away)."""
        return self.board.abandoned()

    def longest_wait_s(self) -> float:
        """How long the first in line has waited (0 with none)."""
        return self.board.longest_wait_s()

    def retry_after_s(self) -> int:
        """How long the line now takes to clear: its length (and the caller)
        over the pace slots were freed at lately; 1 s with no pace yet."""
        rate = self.board.pace()
        if rate is None:
            return 1
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil((self.in_line + 1) / rate)))

    async def enter(self) -> None:
        """Take a slot: now, or after a wait in line; else raise the 429."""
        if self.board.take_free(self.me, self.max_running):
            return
        if not await self._wait(self.max_wait_s, self.max_queued):
            raise busy(
                f"no slot was freed in {self.max_wait_s:g} s of waiting (execbox serve "
                f"--max-concurrency {self.max_running} --max-queue-wait {self.max_wait_s:g}): "
                "retry after Retry-After seconds",
                self.retry_after_s(),
            )

    async def in_slot(self, work: Callable[[], Awaitable[T]]) -> T:
        """``work()``'s answer, run in a slot (``enter``: the 429 past the
        line), the slot given back when it ends, is cancelled or fails.
        Cancelled in line, it leaves the line and never runs."""
        await self.enter()
        try:
            return await work()
        finally:
            self.release()

    async def acquire(self) -> None:
        """Take a slot, waiting in line as long as it takes."""
        if not self.board.take_free(self.me, self.max_running):
            await self._wait(None, None)

    def _oldest_ns(self) -> int:
        return self._line[0].since if self._line else 0

    async def _wait(self, deadline_s: float | None, max_queued: int | None) -> bool:
        """Wait in line for a slot handed over by ``release``; False when
        ``deadline_s`` passed first; the 429 when the line is full
        (``max_queued``; None: no bound). A waiter handed a slot as it was
        cancelled passes the slot on."""
        entry = _Waiter(asyncio.get_running_loop().create_future())
        self._line.append(entry)
        if not self.board.join_line(
            self.me, 1 << 62 if max_queued is None else max_queued, self._oldest_ns()
        ):
            self._line.remove(entry)
            raise busy(
                f"{self.running} executions are running and {self.in_line} wait, the most this server "
                f"runs and holds (execbox serve --max-concurrency {self.max_running} "
                f"--max-queue {self.max_queued}): retry after Retry-After seconds",
                self.retry_after_s(),
            )
        cancelled = False
        try:
            if deadline_s is None:
                await entry.future
            else:
                async with asyncio.timeout(deadline_s):
                    await entry.future
            return True
        except TimeoutError:
            return entry.served  # handed a slot just as the wait ran out
        except BaseException:
            cancelled = True
            if entry.served:
                self.release()
            raise
        finally:
            if not entry.served:
                self._line.remove(entry)
                self.board.leave_line(self.me, self._oldest_ns(), cancelled=cancelled)

    def _serve_first(self) -> None:
        """Hand a slot to the first waiter here (counted out of the line by the board)."""
        entry = self._line.popleft()
        entry.served = True
        if not entry.future.done():
            entry.future.set_result(None)  # the slot passes on: running stays
        self.board.set_oldest(self.me, self._oldest_ns())

    def release(self) -> None:
        """Give a slot back: to the line that has waited longest (this
        worker's or another's), else to the free ones."""
        if self.board.release(self.me) == self.me:
            self._serve_first()

    def _take_handed(self, fd: int) -> None:
        """Slots other workers handed here: to the waiters here, the spare ones on."""
        try:
            while os.read(fd, 4096):
                pass
        except BlockingIOError:
            pass
        served, spare = self.board.take_handed(self.me)
        for _ in range(served):
            self._serve_first()
        for _ in range(spare):
            self.release()


class _Waiter:
    """One request in line: since when, woken by its future, and whether a
    slot was handed to it (then it is out of the line, whatever its future)."""

    __slots__ = ("future", "served", "since")

    def __init__(self, future: asyncio.Future[None]) -> None:
        self.future = future
        self.since = time.monotonic_ns()
        self.served = False
