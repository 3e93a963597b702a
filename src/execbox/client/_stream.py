"""Following an execution's events, resumed where they stopped.

The server keeps every event of a session's last executions, numbered
from 1, and replays those after a given id (``GET .../events?after=N``,
``Last-Event-ID``): reading them again is idempotent, so a stream whose
connection drops before its ``end`` is picked up again from the last id
seen, up to ``MAX_RESUMES`` times in a row without a new event. Starting
the execution (the POST) is never repeated: that would run the code twice.

The stream is read as hostile: an answer that is not
``text/event-stream``, an execution id that is not an id, event ids that
go back, an end that names another execution are ``ServiceError``
(bad_answer), and the whole stream, resumptions included, ends by its
``deadline`` (a stream of keepalives alone never ends by itself).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from .._errors import ServiceError
from .._run_events import EndEvent, RunEvent, StartEvent
from ._answers import bad_answer, check_id, parse_json
from ._http import Transport
from ._sse import frames, run_event
from ._wire import service_error

__all__ = ["MAX_RESUMES", "follow"]

MAX_RESUMES = 5
SSE = {"Accept": "text/event-stream"}


def follow(
    transport: Transport,
    executions: str,
    *,
    start: Callable[[], AbstractContextManager[Any]] | None = None,
    execution_id: str | None = None,
    after: int = 0,
    deadline: float | None = None,
    setting: str = "Client(run_timeout_s=...)",
    on_execution: Callable[[str], None] | None = None,
) -> Iterator[RunEvent]:
    """The events under ``executions`` (a session's ``.../executions``):
    those of the execution ``start()`` opens (the POST that starts it), or
    of ``execution_id`` after event ``after``; until its EndEvent, or
    ``deadline`` (``time.monotonic()``; ``setting`` names what sets it).
    An end that carries no result but an error (execbox itself failed)
    raises it."""
    last = after
    drops = 0
    while True:
        if start is not None:
            opening, method, path, start = start(), "POST", executions, None
        else:
            method, path = "GET", f"{executions}/{execution_id}/events"
            opening = _resume(transport, path, last, deadline)
        fatal: ServiceError | None = None  # not a dropped connection: never resumed
        try:
            with opening as response:
                what = f"{method} {transport.base_url}{path}"
                _check_event_stream(response, what)
                if execution_id is None and response.headers.get("x-execution-id") is not None:
                    execution_id = check_id(response.headers["x-execution-id"], f"{what} (X-Execution-Id)")
                if execution_id is not None and on_execution is not None:
                    on_execution(execution_id)
                chunks = transport.chunks(response, method, path, deadline=deadline, setting=setting)
                for frame in frames(chunks, transport.max_answer_bytes):
                    try:
                        event = run_event(frame)
                        _check_order(frame.id, last, what)
                        _check_execution(event, frame, execution_id, what)
                    except ServiceError as exc:  # data this client cannot read
                        fatal = exc
                        break
                    if frame.id is not None:
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
            if exc.status is not None or execution_id is None or exc.code in ("bad_answer", "too_large"):
                raise  # an answer (404, 410...), a wrong one, or nothing to resume: the POST itself failed
            problem = exc.message
        else:
            if fatal is not None:
                raise fatal
            problem = "the stream ended before its end event"
        drops += 1
        if drops > MAX_RESUMES:
            raise _lost(execution_id, last, drops, problem)
        transport.check_deadline(deadline, method, path, setting)
        time.sleep(min(2.0, 0.05 * 2**drops))


def _resume(
    transport: Transport, path: str, last: int, deadline: float | None
) -> AbstractContextManager[Any]:
    """The GET that reads an execution's events again after event ``last``."""
    return transport.open(
        "GET",
        path,
        params={"after": last},
        deadline=deadline,
        headers={**SSE, "Last-Event-ID": str(last)},
    )


def _check_event_stream(response: Any, what: str) -> None:
    kind = response.headers.get("content-type", "")
    if kind.split(";")[0].strip().lower() != "text/event-stream":
        raise bad_answer(what, f"it answered {kind or 'no Content-Type'!r:.80}, not text/event-stream")


def _lost(execution_id: str | None, last: int, drops: int, problem: str) -> ServiceError:
    """Why the events are given up on, and how to read the rest."""
    return ServiceError(
        f"the events of execution {execution_id} stopped after event {last}, "
        f"{drops} time(s) in a row (the last: {problem}); the execution goes on and the "
        f"server keeps its events: read them with Session.events({execution_id!r}, "
        f"after={last})",
        code="connection_lost",
        retryable=True,
    )


def _check_order(frame_id: str | None, last: int, what: str) -> None:
    """Event ids are the numbers 1, 2, ... of the execution's events: each after the last seen."""
    if frame_id is None:
        return
    if not (frame_id.isascii() and frame_id.isdigit() and len(frame_id) <= 18) or int(frame_id) <= last:
        raise bad_answer(what, f"event id {frame_id!r:.40} is not a number after the last one seen ({last})")


def _check_execution(event: RunEvent | None, frame: Any, execution_id: str | None, what: str) -> None:
    """A start or an end that names another execution than the stream's is forged."""
    named = getattr(event, "execution_id", None) if isinstance(event, StartEvent) else None
    if isinstance(event, EndEvent):
        named = parse_json(frame.data, what).get("id")
    if named is not None and execution_id is not None and named != execution_id:
        raise bad_answer(
            what, f"its {frame.event} event names execution {named!r:.80}, not this stream's {execution_id!r}"
        )
