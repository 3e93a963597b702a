"""The three ways to drive an executor's block loop from outside its
thread: ``arun`` (await the result, the loop in a kept thread:
``_thread_cache``), ``stream`` and ``astream`` (iterate over the run's
events). Each gives the loop a ``Cancellation`` that a
cancelled task or a closed iterator sets, so the block's process tree is
killed, then waits for the loop to be done with it."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Generator
from typing import Any, Protocol

from .._models import CodeBlock, ExecutionResult
from .._run_events import EndEvent, EventSink, RunEvent
from ._thread_cache import run_in_thread
from ._watch import Cancellation


class Executor(Protocol):
    """What these drive: an executor's block loop."""

    def _run_blocks(
        self, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink
    ) -> ExecutionResult: ...


__all__ = ["arun_blocks", "astream_events", "stream_events"]

_DONE = object()


async def arun_blocks(executor: Executor, blocks: list[CodeBlock], sink: EventSink) -> ExecutionResult:
    """The block loop in a thread, awaited; cancelling the task kills what
    the block started and returns once the loop is done with it."""
    cancel = Cancellation()
    loop = asyncio.get_running_loop()
    future: asyncio.Future[ExecutionResult] = loop.create_future()

    def work() -> None:
        try:
            result = executor._run_blocks(blocks, cancel, sink)
        except BaseException as exc:  # noqa: BLE001 (handed to the awaiting task)
            loop.call_soon_threadsafe(_settle, future, None, exc)
        else:
            loop.call_soon_threadsafe(_settle, future, result, None)

    run_in_thread(work)
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        cancel.cancel()
        while not future.done():  # the thread must be done with the pipe
            try:
                await asyncio.shield(future)
            except asyncio.CancelledError:
                continue
            except BaseException:  # noqa: BLE001 (the run ended, however: stop waiting)
                break
        raise
    finally:
        if future.done():
            cancel.close()


def stream_events(executor: Executor, blocks: list[CodeBlock]) -> Generator[RunEvent, None, None]:
    events: queue.Queue[Any] = queue.Queue()
    cancel = Cancellation()
    failure: list[BaseException] = []

    def work() -> None:
        try:
            executor._run_blocks(blocks, cancel, EventSink(events.put))
        except BaseException as exc:  # noqa: BLE001 (raised to the iterating caller)
            failure.append(exc)
        finally:
            events.put(_DONE)

    thread = threading.Thread(target=work, name="execbox-stream", daemon=True)
    thread.start()
    try:
        while (item := events.get()) is not _DONE:
            yield item
        if failure:
            raise failure[0]
    finally:
        if thread.is_alive():  # closed early: kill the run, wait for the loop to let go
            cancel.cancel()
            thread.join()
        cancel.close()


async def astream_events(executor: Executor, blocks: list[CodeBlock]) -> AsyncIterator[RunEvent]:
    loop = asyncio.get_running_loop()
    events: asyncio.Queue[RunEvent] = asyncio.Queue()
    sink = EventSink(lambda event: loop.call_soon_threadsafe(events.put_nowait, event))
    task = loop.create_task(arun_blocks(executor, blocks, sink))
    try:
        while not (task.done() and events.empty()):
            getter = loop.create_task(events.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()  # the run is over; what it put before settling is queued
                continue
            event = getter.result()
            yield event
            if isinstance(event, EndEvent):
                break
        await task  # its exception, if the loop raised one
    finally:
        if not task.done():  # closed early: cancelling kills the run
            task.cancel()
            await asyncio.wait({task})


def _settle(future: asyncio.Future[Any], result: Any, exc: BaseException | None) -> None:
    if future.done():
        return
    if exc is not None:
        future.set_exception(exc)
    else:
        future.set_result(result)
