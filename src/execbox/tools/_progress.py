"""Run blocks and report what they print while they run, for a caller
that can only send messages now and then (an MCP tool's progress
notifications): the output is gathered and sent every PERIOD_S, at most
MAX_MESSAGE_CHARS of it per message (the tail; the result has it all).

Only that tail is kept between two messages, in the executor's thread, and
nothing is queued on the event loop per chunk: a block printing gigabytes
costs the caller a few KiB, not what it printed (security issue 39: 512 MiB
printed grew the MCP server by as much)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from .._models import CodeBlock, ExecutionResult
from .._run_events import OutputEvent, RunEvent
from ..backends import Executor

__all__ = ["run_reporting"]

PERIOD_S = 0.25
MAX_MESSAGE_CHARS = 4000

# report(progress, total, message): progress grows with every message (the
# characters printed so far), as MCP requires.
Report = Callable[[float, "float | None", "str | None"], Awaitable[None]]


class _Tail:
    """What was printed since the last message: its last MAX_MESSAGE_CHARS
    characters and how many there were in all (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._text = ""
        self._fresh = False
        self.printed = 0

    def add(self, text: str) -> None:
        with self._lock:
            self.printed += len(text)
            self._text = (self._text + text[-MAX_MESSAGE_CHARS:])[-MAX_MESSAGE_CHARS:]
            self._fresh = self._fresh or bool(text)

    def take(self) -> tuple[int, str] | None:
        """(characters printed so far, the tail since the last take), or None: nothing new."""
        with self._lock:
            if not self._fresh:
                return None
            taken, self._text, self._fresh = self._text, "", False
            return self.printed, taken


async def run_reporting(
    executor: Executor, blocks: CodeBlock | list[CodeBlock], report: Report
) -> ExecutionResult:
    loop = asyncio.get_running_loop()
    tail = _Tail()

    def on_event(event: RunEvent) -> None:  # in the executor's thread
        if isinstance(event, OutputEvent):
            tail.add(event.text)

    async def reporter() -> None:
        while True:
            await asyncio.sleep(PERIOD_S)
            taken = tail.take()
            if taken is None:
                continue
            printed, message = taken
            try:
                await report(printed, None, message)
            except Exception:  # noqa: BLE001 - a client gone or refusing progress must not fail the run
                return

    task = loop.create_task(reporter())
    try:
        return await executor.arun(blocks, on_event=on_event)
    finally:
        task.cancel()
