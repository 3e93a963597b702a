"""One execution in a session: the task that runs it, and its events, kept
so that a dropped stream can be resumed (``events(after=N)``).

Events, each with an ``id`` (its sequence number, from 1): ``start`` (with
the execution's ids); then the core's events as they happen
(``execbox._run_events``: ``block_start``, ``stdout`` / ``stderr``,
``display``, ``block_end``), each sent as ``event_to_dict`` makes it; then
always ``end``: ``{status, result, error}`` with the whole
``ExecutionResult`` (for a cancelled run, the core's own: the blocks that
ran, the files they changed; one made of what it printed only when the run
was cancelled before the core could end it).
Streamed text past twice ``Limits.max_output_bytes`` is dropped with one
``truncated`` event (the result keeps its own capped output): a loop
printing forever must not fill the server's memory.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from .._errors import ExecboxError, NodeLostError
from .._models import CodeBlock, ErrorInfo, ExecutionResult
from .._run_events import EndEvent, OutputEvent, RunEvent, StartEvent, event_to_dict
from ..backends import Executor
from ._errors import ApiError, from_execbox

__all__ = ["Execution"]


class Execution:
    def __init__(self, session_id: str, executor: Executor, blocks: list[CodeBlock]) -> None:
        self.id = "e_" + secrets.token_hex(8)
        self.session_id = session_id
        self.executor = executor
        self.blocks = blocks
        self.status = "running"  # then completed, cancelled or failed
        self.result: ExecutionResult | None = None
        self.error: ApiError | None = None
        self.node_lost: str | None = None  # why, when the Ray node it ran on (--ray) was lost
        self.started = time.time()
        self.events: list[tuple[int, str, Any]] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._streamed = 0
        self._stream_cap = 2 * executor.limits.max_output_bytes
        self._text: dict[str, list[str]] = {"stdout": [], "stderr": [], "output": []}
        self._core_end: EndEvent | None = None  # the core's last event (its result, also when cancelled)

    @property
    def done(self) -> bool:
        return self.status != "running"

    def start(self, on_done: Callable[[Execution], None]) -> None:
        self._emit(
            "start", {"execution_id": self.id, "session_id": self.session_id, "blocks": len(self.blocks)}
        )
        self._task = asyncio.get_running_loop().create_task(self._run(on_done))
        self._task.add_done_callback(lambda task: self._never_ran(task, on_done))

    def _never_ran(self, task: asyncio.Task[None], on_done: Callable[[Execution], None]) -> None:
        """A task cancelled before its first step never ran ``_run``: end it here."""
        if task.cancelled() and self.status == "running":
            self.status = "cancelled"
            self.result = self._cancelled_result()
            on_done(self)
            self._emit("end", self.summary())

    async def _run(self, on_done: Callable[[Execution], None]) -> None:
        loop = asyncio.get_running_loop()

        def on_event(event: RunEvent) -> None:  # in the executor's thread
            loop.call_soon_threadsafe(self._event, event)

        try:
            result = await self.executor.arun(self.blocks, on_event=on_event)
        except asyncio.CancelledError:
            # arun returns once the core is done with the run: its EndEvent, scheduled on this loop
            # before arun's own end, has been handled by now (unless it never started)
            self.status = "cancelled"
            core = self._core_end.result if self._core_end is not None else None
            self.result = core if core is not None else self._cancelled_result()
        except (ExecboxError, OSError) as exc:
            self.status = "failed"
            self.error = from_execbox(exc)
            self.node_lost = str(exc) if isinstance(exc, NodeLostError) else None
        except Exception as exc:  # noqa: BLE001 - a bug: said in the stream's end, not a dropped stream
            self.status = "failed"
            self.error = ApiError(500, "internal", f"{type(exc).__name__}: {exc}")
        else:
            self.status = "completed"
            self.result = result
        finally:
            on_done(self)
        self._emit("end", self.summary())

    def _event(self, event: RunEvent) -> None:
        """A core event, as the stream sends it: start and end are the
        execution's own (with its ids; the end also when execbox failed)."""
        if isinstance(event, EndEvent):
            self._core_end = event
            return
        if isinstance(event, StartEvent) or self.done:
            return
        if isinstance(event, OutputEvent):
            self._output(event)
        else:
            self._emit(event.kind, event_to_dict(event))

    def _output(self, event: OutputEvent) -> None:
        text = event.text
        self._text[event.stream].append(text)
        self._text["output"].append(text)
        if self._streamed >= self._stream_cap:
            return
        self._streamed += len(text.encode("utf-8", "surrogatepass"))
        self._emit(event.kind, event_to_dict(event))
        if self._streamed >= self._stream_cap:
            self._emit(
                "truncated",
                {
                    "after_bytes": self._stream_cap,
                    "note": "the rest is in the result (capped by limits.max_output_bytes)",
                },
            )

    def _cancelled_result(self) -> ExecutionResult:
        """A run cancelled before the core ended it: what it printed."""

        def joined(name: str) -> str:
            return "".join(self._text[name])[-self.executor.limits.max_output_bytes :]

        return ExecutionResult(
            exit_code=130,
            output=joined("output") + "\nCancelled.\n",
            stdout=joined("stdout"),
            stderr=joined("stderr"),
            error=ErrorInfo("Cancelled", "cancelled by a request"),
            duration_s=time.time() - self.started,
            backend=self.executor.name,
        )

    def _emit(self, event: str, data: Any) -> None:
        self.events.append((len(self.events) + 1, event, data))
        self._changed.set()
        self._changed = asyncio.Event()  # the next wait waits for the next event

    async def cancel(self, wait_s: float = 10.0) -> None:
        """Kill what runs (the executor kills the process tree) and wait for the end."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait({self._task}, timeout=wait_s)

    async def wait(self) -> None:
        """Until the execution ends (a waiter that goes away leaves it running)."""
        if self._task is not None:
            await asyncio.wait({self._task})

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session_id": self.session_id,
            "status": self.status,
            "result": self.result.to_dict() if self.result is not None else None,
            "error": self.error.body()["error"] if self.error is not None else None,
        }

    async def stream(self, after: int, keepalive_s: float) -> AsyncIterator[tuple[int, str, Any] | None]:
        """The events after id ``after`` as they come, until ``end``; None
        when ``keepalive_s`` passed without one."""
        sent = max(0, after)
        while True:
            changed = self._changed
            while sent < len(self.events):
                item = self.events[sent]
                sent += 1
                yield item
                if item[1] == "end":
                    return
            if self.events and self.events[-1][1] == "end":
                return
            try:
                await asyncio.wait_for(changed.wait(), timeout=keepalive_s)
            except TimeoutError:
                yield None
