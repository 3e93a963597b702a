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
What the events keep of a block's text and displays is bounded by
``Limits.max_output_bytes``, each event charged ``EVENT_COST`` bytes over
its own (a block that prints one byte at a time makes an event a byte):
past it, they are dropped with one ``truncated`` event (the result keeps
its own capped output). The drop happens in the executor's thread, before
the event loop is asked to do anything, so that a block printing gigabytes
neither fills the server's memory nor its loop's queue (security issue 39:
512 MiB printed under a 1 MiB cap grew the server from 45 to 704 MiB). A
result made here, for a run cancelled before the core ended it, is made of
the text its events kept: the server holds no second capture of what a
block prints (the backend's is the one, ``backends._output``).
Once it ended, its events and result are held once (``_replay``), and
``kept_bytes`` says what they hold, for the budgets of ``_kept``.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from .._errors import ExecboxError, NodeLostError
from .._models import CodeBlock, ErrorInfo, ExecutionResult
from .._run_events import (
    DisplayEvent,
    EndEvent,
    OutputEvent,
    RunEvent,
    StartEvent,
    TruncatedEvent,
    event_to_dict,
)
from ..backends import Executor
from ._errors import ApiError, from_execbox
from ._replay import END, EVENT_COST, KeptResult, footprint, keep_events, materialized

__all__ = ["EVENT_COST", "Execution"]


class Execution:
    def __init__(self, session_id: str, executor: Executor, blocks: list[CodeBlock]) -> None:
        self.id = "e_" + secrets.token_hex(8)
        self.session_id = session_id
        self.executor = executor
        self.blocks = blocks
        self.status = "running"  # then completed, cancelled or failed
        self._result: ExecutionResult | None = None
        self._kept: KeptResult | None = None  # the result once it ended, held once (_replay)
        self.kept_bytes = 0  # what it holds once it ended (_replay.footprint)
        self.error: ApiError | None = None
        self.node_lost: str | None = None  # why, when the Ray node it ran on (--ray) was lost
        self.started = time.time()
        self.events: list[tuple[int, str, Any]] = []
        self._changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._budget = executor.limits.max_output_bytes  # of the events' text and displays
        self._lock = threading.Lock()  # the gate's: displays may come from another thread than output
        self._streamed = 0  # bytes the events hold (under _lock)
        self._core_end: EndEvent | None = None  # the core's last event (its result, also when cancelled)

    @property
    def done(self) -> bool:
        return self.status != "running"

    @property
    def result(self) -> ExecutionResult | None:
        return self._kept.full() if self._kept is not None else self._result

    @result.setter
    def result(self, result: ExecutionResult | None) -> None:
        self._result, self._kept = result, None

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
            self._keep()
            on_done(self)
            self._emit("end", END)

    async def _run(self, on_done: Callable[[Execution], None]) -> None:
        loop = asyncio.get_running_loop()

        def on_event(event: RunEvent) -> None:  # in the executor's thread
            for passed in self._gate(event):
                loop.call_soon_threadsafe(self._event, passed)

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
            try:
                self._keep()
            finally:
                on_done(self)
        self._emit("end", END)

    def _keep(self) -> None:
        """Hold its events and result once (``_replay``), and count what they hold."""
        result, self._core_end = self._result, None  # the core's result: held once below
        if result is not None:
            self._kept, self._result = KeptResult(result), None
        self.events = keep_events(self.events, result)
        error = self.error.body() if self.error is not None else None
        self.kept_bytes = footprint(self.events, self._kept, error)

    def _gate(self, event: RunEvent) -> list[RunEvent]:
        """What of ``event`` the events may keep (in the executor's thread):
        text and displays within the budget, a cut text and one
        ``TruncatedEvent`` where it runs out, nothing after."""
        if not isinstance(event, (OutputEvent, DisplayEvent)):
            return [event]
        if self._streamed >= self._budget:  # a flood's every chunk past the budget: no work (it only grows)
            return []
        if isinstance(event, OutputEvent):
            data = event.text.encode("utf-8", "surrogatepass")
            cost = len(data) + EVENT_COST
        else:
            shown, data = event.display, b""
            cost = EVENT_COST + sum(len(part or "") for part in (shown.mime_type, shown.path, shown.data))
        with self._lock:
            room = self._budget - self._streamed
            if room <= 0:
                return []
            self._streamed = self._streamed + cost if cost < room else self._budget
        if cost < room:
            return [event]
        cut = data[: max(0, room - EVENT_COST)].decode("utf-8", "ignore")  # a display is not cut
        kept = [OutputEvent(event.stream, cut, event.block)] if isinstance(event, OutputEvent) and cut else []
        return [*kept, self._truncated()]

    def _truncated(self) -> TruncatedEvent:
        return TruncatedEvent(
            self._budget,
            "the rest of the text and displays is not streamed: the result has the output "
            "(capped by limits.max_output_bytes)",
        )

    def _event(self, event: RunEvent) -> None:
        """A core event, as the stream sends it: start and end are the
        execution's own (with its ids; the end also when execbox failed)."""
        if self.done:  # one come after the end (its result, if any, is the one held)
            return
        if isinstance(event, EndEvent):
            self._core_end = event
            return
        if isinstance(event, StartEvent):
            return
        self._emit(event.kind, event_to_dict(event))

    def _cancelled_result(self) -> ExecutionResult:
        """A run cancelled before the core ended it: what it printed, as far
        as its events kept it (within the cap: then a line says the rest was not kept)."""
        texts: dict[str, list[str]] = {"output": [], "stdout": [], "stderr": []}
        for _, name, data in self.events:
            if name in ("stdout", "stderr") and isinstance(data, dict):
                texts["output"].append(data["text"])
                texts[name].append(data["text"])
            elif name == "truncated":
                texts["output"].append(
                    f"\n[... the rest of the output was not kept: more than "
                    f"limits.max_output_bytes={self._budget} ...]\n"
                )
        output, stdout, stderr = ("".join(texts[name]) for name in ("output", "stdout", "stderr"))
        return ExecutionResult(
            exit_code=130,
            output=output + "\nCancelled.\n",
            stdout=stdout,
            stderr=stderr,
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
                item = materialized(self.events[sent], self.summary)
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
