"""Following an execution's events, resumed where they stopped.

The server keeps every event of a session's last executions, numbered
from 1, and replays those after a given id (``GET .../events?after=N``,
``Last-Event-ID``): reading them again is idempotent, so a stream whose
connection drops before its ``end`` is picked up again from the last id
seen, up to ``MAX_RESUMES`` times in a row without a new event. Starting
the execution (the POST) is never repeated: that would run the code twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from .._errors import ServiceError
from .._run_events import EndEvent, RunEvent
from ._http import Transport
from ._sse import frames, run_event
from ._wire import service_error

__all__ = ["MAX_RESUMES", "follow"]

MAX_RESUMES = 5
SSE = {"Accept": "text/event-stream"}


def follow(transport: Transport, executions: str, *, start: Callable[[], AbstractContextManager[Any]] | None = None,
           execution_id: str | None = None, after: int = 0,
           on_execution: Callable[[str], None] | None = None) -> Iterator[RunEvent]:
    """The events under ``executions`` (a session's ``.../executions``):
    those of the execution ``start()`` opens (the POST that starts it), or
    of ``execution_id`` after event ``after``; until its EndEvent. An end
    that carries no result but an error (execbox itself failed) raises it."""
    last = after
    drops = 0
    while True:
        if start is not None:
            opening, method, path, start = start(), "POST", executions, None
        else:
            method, path = "GET", f"{executions}/{execution_id}/events"
            opening = transport.open("GET", path, params={"after": last}, headers={**SSE, "Last-Event-ID": str(last)})
        fatal: ServiceError | None = None  # not a dropped connection: never resumed
        try:
            with opening as response:
                if execution_id is None:
                    execution_id = response.headers.get("x-execution-id")
                if execution_id is not None and on_execution is not None:
                    on_execution(execution_id)
                for frame in frames(transport.chunks(response, method, path)):
                    try:
                        event = run_event(frame)
                    except ServiceError as exc:  # data this client cannot read
                        fatal = exc
                        break
                    if frame.id is not None and frame.id.isdigit():
                        last = int(frame.id)
                        drops = 0
                    if event is None:
                        continue
                    if isinstance(event, EndEvent) and event.result is None and event.error is not None:
                        fatal = service_error(event.error)
                        break
                    yield event
                    if isinstance(event, EndEvent):
                        return
        except ServiceError as exc:
            if exc.status is not None or execution_id is None:
                raise  # an answer (404, 410...) or nothing to resume: the POST itself failed
            problem = exc.message
        else:
            if fatal is not None:
                raise fatal
            problem = "the stream ended before its end event"
        drops += 1
        if drops > MAX_RESUMES:
            raise ServiceError(f"the events of execution {execution_id} stopped after event {last}, "
                               f"{drops} time(s) in a row (the last: {problem}); the execution goes on and the "
                               f"server keeps its events: read them with Session.events({execution_id!r}, "
                               f"after={last})", code="connection_lost", retryable=True)
        time.sleep(min(2.0, 0.05 * 2 ** drops))
