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

Defaults (``ServerConfig``): a line of 8x ``max_concurrency`` and 30 s, so a
burst of 8x the concurrency of short runs all finishes, none refused.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque

from ._errors import ApiError

__all__ = ["Load", "busy"]

# slot releases remembered for the pace of the line (Retry-After)
PACE_WINDOW = 64
# the most a Retry-After says (a line that clears slower than this is best
# asked again then, when the pace is known better)
MAX_RETRY_AFTER_S = 60


def busy(message: str, retry_after_s: int = 1) -> ApiError:
    return ApiError(429, "busy", message, retryable=True, headers={"Retry-After": str(max(1, retry_after_s))})


class Load:
    """Slots (``max_running``), the line for them (``max_queued`` long, each
    waiting ``max_wait_s`` at most) and the count of requests waiting for
    their session's running execution (``line_waits``, shown as queued)."""

    def __init__(self, max_running: int, max_queued: int = 0, max_wait_s: float = 0.0) -> None:
        self.max_running = max_running
        self.max_queued = max_queued
        self.max_wait_s = max_wait_s
        self.running = 0
        self.line_waits = 0
        self._line: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._freed_at: deque[float] = deque(maxlen=PACE_WINDOW)

    @property
    def queued(self) -> int:
        """Requests waiting: for a slot, or for their session's running execution."""
        return self.in_line + self.line_waits

    @property
    def in_line(self) -> int:
        return sum(1 for _, waiter in self._line if not waiter.done())

    def longest_wait_s(self) -> float:
        """How long the first in line has waited (0 with none)."""
        now = time.monotonic()
        return max((now - since for since, waiter in self._line if not waiter.done()), default=0.0)

    def retry_after_s(self) -> int:
        """How long the line now takes to clear: its length (and the caller)
        over the pace slots were freed at lately; 1 s with no pace yet."""
        rate = self._pace()
        if rate is None:
            return 1
        return min(MAX_RETRY_AFTER_S, max(1, math.ceil((self.in_line + 1) / rate)))

    def _pace(self) -> float | None:
        """Slots freed per second over the last ``PACE_WINDOW`` releases."""
        if len(self._freed_at) < 2:
            return None
        span = self._freed_at[-1] - self._freed_at[0]
        return (len(self._freed_at) - 1) / span if span > 0 else None

    async def enter(self) -> None:
        """Take a slot: now, or after a wait in line; else raise the 429."""
        if self._take_free():
            return
        if self.in_line >= self.max_queued:
            raise busy(
                f"{self.running} executions are running and {self.in_line} wait, the most this server "
                f"runs and holds (execbox serve --max-concurrency {self.max_running} "
                f"--max-queue {self.max_queued}): retry after Retry-After seconds",
                self.retry_after_s(),
            )
        if not await self._wait(self.max_wait_s):
            raise busy(
                f"no slot was freed in {self.max_wait_s:g} s of waiting (execbox serve "
                f"--max-concurrency {self.max_running} --max-queue-wait {self.max_wait_s:g}): "
                "retry after Retry-After seconds",
                self.retry_after_s(),
            )

    async def acquire(self) -> None:
        """Take a slot, waiting in line as long as it takes."""
        if not self._take_free():
            await self._wait(None)

    def _take_free(self) -> bool:
        """Take a free slot if there is one and nobody waits for it."""
        if self.running < self.max_running and not self.in_line:
            self.running += 1
            return True
        return False

    async def _wait(self, deadline_s: float | None) -> bool:
        """Wait in line for a slot handed over by ``release``; False when
        ``deadline_s`` passed first. A cancelled waiter gives back a slot it
        was handed in the meantime."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (time.monotonic(), waiter)
        self._line.append(entry)
        try:
            if deadline_s is None:
                await waiter
            else:
                async with asyncio.timeout(deadline_s):
                    await waiter
            return True
        except TimeoutError:
            return waiter.done() and not waiter.cancelled()  # handed a slot just as the wait ran out
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot, then cancelled: the next in line has it
            waiter.cancel()
            raise
        finally:
            try:
                self._line.remove(entry)
            except ValueError:
                pass

    def release(self) -> None:
        """Give a slot back: to the first in line, else to the free ones."""
        self._freed_at.append(time.monotonic())
        while self._line:
            _, waiter = self._line.popleft()
            if not waiter.done():
                waiter.set_result(None)  # the slot passes on: running stays
                return
        self.running -= 1
