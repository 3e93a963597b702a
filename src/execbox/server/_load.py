"""Back-pressure: how many executions run, how many wait, and the 429 that
answers at once when the server is full (never a request left hanging).

A request that runs code takes a slot with ``admit`` (429 when none is
free). A batch is admitted when a slot is free for its first request; its
other requests then wait for slots (``acquire``) and are counted as queued.
"""

from __future__ import annotations

import asyncio

from ._errors import ApiError

__all__ = ["Load", "busy"]


def busy(message: str, retry_after_s: int = 1) -> ApiError:
    return ApiError(429, "busy", message, retryable=True, headers={"Retry-After": str(max(1, retry_after_s))})


class Load:
    def __init__(self, max_running: int) -> None:
        self.max_running = max_running
        self.running = 0
        self.queued = 0
        self._freed = asyncio.Condition()

    def admit(self) -> None:
        """Take a slot now, or raise the 429."""
        if self.running >= self.max_running:
            raise busy(
                f"{self.running} executions are running, the most this server runs at once "
                f"(execbox serve --max-concurrency {self.max_running}): retry after a second"
            )
        self.running += 1

    async def acquire(self) -> None:
        """Take a slot, waiting (counted as queued) until one is free."""
        self.queued += 1
        try:
            async with self._freed:
                await self._freed.wait_for(lambda: self.running < self.max_running)
                self.running += 1
        finally:
            self.queued -= 1

    def release(self) -> None:
        self.running -= 1
        asyncio.get_running_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._freed:
            self._freed.notify_all()
