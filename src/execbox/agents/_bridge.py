"""Where an agent waits, so that cancelling it stops what it started.

An agent's steps are one generator. ``stream`` runs it inline (``Bridge()``);
``arun_stream`` runs it in a thread and gives it a ``Bridge`` on the
caller's event loop: each executor run, async tool call and async approval
is handed to that loop as a task. When the caller's task is cancelled (or
it stops reading), those tasks are cancelled and awaited: an executor's
``arun`` kills the block's processes before it returns, so nothing the
agent started goes on running; the generator then stops at its next wait.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

from .._models import CodeBlock, ExecutionResult

__all__ = ["AgentCancelled", "Bridge", "stream_in_thread"]

T = TypeVar("T")


class AgentCancelled(BaseException):
    """The agent's caller cancelled it: the generator stops here (a
    BaseException, so no ``except Exception`` on the way swallows it)."""


class Bridge:
    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop
        self.cancelled = threading.Event()
        self._tasks: set[asyncio.Task[Any]] = set()

    def run_blocks(self, executor: Any, blocks: Sequence[CodeBlock]) -> ExecutionResult:
        if self.loop is None:
            return executor.run(list(blocks))
        return self.wait(executor.arun(list(blocks)))

    def call_tool(self, tool: Any, arguments: str) -> Any:
        acall = getattr(tool, "acall", None)
        if self.loop is not None and acall is not None:
            return self.wait(acall(arguments))
        self.check()
        return tool.call(arguments)

    def wait(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """The coroutine's result: on the caller's loop, or here when there is none."""
        if self.loop is None:
            return asyncio.run(coroutine)
        if self.cancelled.is_set():
            coroutine.close()
            raise AgentCancelled
        future = asyncio.run_coroutine_threadsafe(self._tracked(coroutine), self.loop)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            raise AgentCancelled from None

    def check(self) -> None:
        if self.cancelled.is_set():
            raise AgentCancelled

    async def _tracked(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.cancelled.is_set():  # on the loop, as cancel() is: no task slips past it
            coroutine.close()
            raise asyncio.CancelledError
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            return await coroutine
        finally:
            self._tasks.discard(task)

    async def cancel(self) -> None:
        """Cancel what runs for the agent and wait until it has stopped."""
        self.cancelled.set()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def stream_in_thread(produce: Callable[[Bridge], Iterator[T]]) -> AsyncIterator[T]:
    """The items of ``produce(bridge)``, made in a thread, for asyncio."""
    loop = asyncio.get_running_loop()
    bridge = Bridge(loop)
    queue: asyncio.Queue[Any] = asyncio.Queue()
    done = object()

    def put(item: Any) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, item)
        except RuntimeError:  # the loop has closed: nobody is reading
            pass

    def work() -> None:
        try:
            for item in produce(bridge):
                put(item)
        except AgentCancelled:
            pass
        except BaseException as exc:  # noqa: BLE001 (handed to the reader, raised there)
            put(exc)
        put(done)

    threading.Thread(target=work, name="execbox-agent", daemon=True).start()
    finished = False
    try:
        while (item := await queue.get()) is not done:
            if isinstance(item, BaseException):
                finished = True
                raise item
            yield item
        finished = True
    finally:
        if not finished:
            await bridge.cancel()
