"""Run blocks and report what they print while they run, for a caller
that can only send messages now and then (an MCP tool's progress
notifications): the output is gathered and sent every PERIOD_S, at most
MAX_MESSAGE_CHARS of it per message (the tail; the result has it all)."""

from __future__ import annotations

import asyncio
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


async def run_reporting(
    executor: Executor, blocks: CodeBlock | list[CodeBlock], report: Report
) -> ExecutionResult:
    loop = asyncio.get_running_loop()
    pending: list[str] = []

    def on_event(event: RunEvent) -> None:  # in the executor's thread
        if isinstance(event, OutputEvent):
            loop.call_soon_threadsafe(pending.append, event.text)

    async def reporter() -> None:
        printed = 0
        while True:
            await asyncio.sleep(PERIOD_S)
            if not pending:
                continue
            text = "".join(pending)
            pending.clear()
            printed += len(text)
            try:
                await report(printed, None, text[-MAX_MESSAGE_CHARS:])
            except Exception:  # noqa: BLE001 - a client gone or refusing progress must not fail the run
                return

    task = loop.create_task(reporter())
    try:
        return await executor.arun(blocks, on_event=on_event)
    finally:
        task.cancel()
