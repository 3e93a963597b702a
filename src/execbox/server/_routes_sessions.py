"""Sessions and their executions: create, look at, keep alive, reset,
delete; run code (JSON, or server-sent events as it prints), replay a
stream, cancel. Creating one answers its key, once; every other route
here and in ``_routes_files`` takes the session through ``session_of``,
which asks for that key (``X-Execbox-Session-Key``, see ``_sessions``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._errors import ExecboxError
from ._bodies import ExecutionRequest, SessionRequest, checked
from ._disconnect import unless_gone
from ._errors import ApiError, from_execbox
from ._executions import Execution
from ._openapi_ops import BUSY, EID, ERROR, SESSION_ERRORS, SID, ApiRoute, Op, json_answer_of
from ._openapi_schemas import STREAM_TEXT, STREAMS, ref
from ._pieces import json_answer, ndjson_frames, sse_frames
from ._sessions import KEY_HEADER, Session, new_key
from ._state import ServerState, state_of
from ._wire import SSE_KEEPALIVE, backend_of, blocks_of, decode_files, gpus_of, limits_of, read_json

__all__ = ["ROUTES", "session_of"]


def session_of(request: Request) -> Session:
    """The session of the path, for a request that carries its key (403 without)."""
    return state_of(request).sessions.get(request.path_params["sid"], request.headers.get(KEY_HEADER))


def _seconds(value: float | None, name: str, default: float, most: float) -> float:
    value = default if value is None else value
    if not 0 < value <= most:
        raise ApiError(
            400,
            "bad_request",
            f"{name} must be more than 0 and at most {most:g} seconds (execbox serve --max-session-ttl)",
        )
    return float(value)


async def create(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    body = checked(SessionRequest, await read_json(request, config.max_upload_bytes))
    backend = backend_of(body.backend, config)
    limits = limits_of(body.limits, config)
    ttl_s = _seconds(body.ttl_s, "ttl_s", config.session_ttl_s, config.max_session_ttl_s)
    idle_ttl_s = _seconds(
        body.idle_ttl_s, "idle_ttl_s", min(config.session_idle_ttl_s, ttl_s), config.max_session_ttl_s
    )
    env = body.env or {}
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ApiError(
                400,
                "bad_request",
                f"env name {name!r}: a name must be non-empty without '=' or NUL, a value without NUL",
            )
    files = decode_files(body.files)
    options: dict[str, Any] = {}
    given = body.model_fields_set  # asked for, if null: the defaults the server gave before
    if "keep_code_files" in given:
        options["keep_code_files"] = True if body.keep_code_files is None else body.keep_code_files
    if "execution_policies" in given:
        options["execution_policies"] = body.execution_policies or {}
    if env:
        options["env"] = env
    gpus = gpus_of(body.gpus, config, backend)
    if gpus is not None:
        options["gpus"] = gpus
    state.sessions.reserve()
    session = None
    key = new_key()
    try:
        session = await _open(state, backend, limits, options, files, ttl_s, idle_ttl_s, key)
    finally:
        state.sessions.add(session)
    # the key is answered here only, never again (the server keeps its hash)
    return JSONResponse(
        {**session.info(), "key": key},
        status_code=201,
        headers={"Location": f"/v1/sessions/{session.id}", "Cache-Control": "no-store"},
    )


async def _open(
    state: ServerState,
    backend: str,
    limits: Any,
    options: dict[str, Any],
    files: dict[str, bytes],
    ttl_s: float,
    idle_ttl_s: float,
    key: str,
) -> Session:
    """A started executor, its files written before it starts (so that a
    sandbox hands them to its jail with the workspace)."""
    try:
        pinned = (
            {"pinned": True} if state.config.ray_address else {}
        )  # a session's workspace lives on its node
        executor = state.config.make_executor(backend, limits=limits, **pinned, **options)
    except (ExecboxError, TypeError) as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    try:
        for path, content in files.items():
            await asyncio.to_thread(executor.workspace.write_bytes, path, content)
        await asyncio.to_thread(executor.start)
    except (ExecboxError, OSError) as exc:
        await executor.aclose()
        raise from_execbox(exc) from None
    except BaseException:
        await executor.aclose()
        raise
    return Session(
        executor,
        key=key,
        backend=backend,
        limits=limits,
        ttl_s=ttl_s,
        idle_ttl_s=idle_ttl_s,
        worker=state.worker.index,
        keeper=state.sessions.keeper,
    )


async def show(request: Request) -> Response:
    return JSONResponse(session_of(request).info())


async def delete(request: Request) -> Response:
    session = session_of(request)
    await state_of(request).sessions.end(session, "deleted")
    return JSONResponse(session.info(state="deleted"))


async def one_session(request: Request) -> Response:
    """GET or DELETE, one route (a 405 there names both)."""
    return await (delete if request.method == "DELETE" else show)(request)


async def keepalive(request: Request) -> Response:
    session = session_of(request)
    session.touch()
    return JSONResponse(session.info())


async def reset(request: Request) -> Response:
    """Stop what runs; a stateful backend starts afresh (a new kernel). Files stay."""
    session = session_of(request)
    if session.running is not None:
        await session.running.cancel()
    try:
        await asyncio.to_thread(session.executor.restart)
    except (ExecboxError, OSError) as exc:
        raise from_execbox(exc) from None
    session.touch()
    return JSONResponse(session.info())


async def execute(request: Request) -> Response:
    """Run blocks in the session: one execution at a time (409, or with
    ``?queue=1`` wait for the running one, counted as queued)."""
    state = state_of(request)
    session = session_of(request)
    blocks = blocks_of(checked(ExecutionRequest, await read_json(request, state.config.max_upload_bytes)))
    queue = request.query_params.get("queue", "0") not in ("0", "false", "")
    await unless_gone(request, _claim(state, session, queue))  # its client gone: out of the line, never run
    execution = Execution(session.id, session.executor, blocks)
    session.running = execution
    session.add(execution)
    session.touch()

    def done(finished: Execution) -> None:
        state.load.release()
        if session.running is finished:
            session.running = None
        session.kept(finished)  # the oldest kept may be dropped for it (_kept)
        session.touch()
        if finished.node_lost:  # the session's node is gone: so is the session (410 node_lost from now on)
            finished.error = ApiError(
                410,
                "session_expired",
                f"session {session.id} has ended: {finished.node_lost}",
                reason="node_lost",
            )
            state.sessions.end_soon(session, "node_lost")

    execution.start(done)
    headers = {
        "Location": f"/v1/sessions/{session.id}/executions/{execution.id}",
        "X-Execution-Id": execution.id,
    }
    streamed = _stream_format(request)
    if streamed is not None:
        return _event_stream(state, execution, 0, headers, streamed)
    await execution.wait()
    if execution.error is not None and execution.result is None:
        raise execution.error
    return json_answer(execution.summary(), headers=headers)


async def _claim(state: ServerState, session: Session, queue: bool) -> None:
    """Wait until the session is free (``queue``) or refuse with 409; then
    take a run slot (in the server's line, bounded, then 429; ``queue``: as long as it takes)."""
    while True:
        if session.running is not None and not queue:
            raise ApiError(
                409,
                "execution_running",
                f"session {session.id} runs execution {session.running.id}: "
                "wait for its end, cancel it, or send ?queue=1 to wait "
                "in line",
                retryable=True,
            )
        if session.running is not None:
            state.load.line_waits += 1
            try:
                await session.running.wait()
            finally:
                state.load.line_waits -= 1
            state.sessions.still_open(session.id)  # 410 if it ended meanwhile
            continue
        if queue:
            await state.load.acquire()
        else:
            await state.load.enter()
        if session.running is None:
            try:
                state.sessions.still_open(session.id)
            except ApiError:
                state.load.release()
                raise
            return
        state.load.release()  # taken while this one waited for a slot


def _stream_format(request: Request) -> str | None:
    accept = request.headers.get("accept", "")
    if "text/event-stream" in accept:
        return "sse"
    if "application/x-ndjson" in accept:
        return "ndjson"
    return None


def _event_stream(
    state: ServerState, execution: Execution, after: int, headers: dict[str, str], form: str = "sse"
) -> Response:
    """The events after id ``after``: server-sent events (a ``: keepalive``
    comment when quiet), or NDJSON lines ``{id, event, data}`` (a
    ``{"event": "keepalive"}`` line)."""

    async def frames() -> AsyncIterator[bytes]:
        async for item in execution.stream(after, state.config.keepalive_s):
            if item is None:
                yield SSE_KEEPALIVE if form == "sse" else b'{"event": "keepalive"}\n'
                continue
            for piece in (sse_frames if form == "sse" else ndjson_frames)(*item):  # the end's, in pieces
                yield piece

    media = "text/event-stream" if form == "sse" else "application/x-ndjson"
    return StreamingResponse(
        frames(),
        media_type=media,
        headers={**headers, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def show_execution(request: Request) -> Response:
    execution = session_of(request).execution(request.path_params["eid"])
    return json_answer({**execution.summary(), "events": len(execution.events)})


async def events(request: Request) -> Response:
    """The stream again from after event ``after`` (or ``Last-Event-ID``)."""
    state = state_of(request)
    execution = session_of(request).execution(request.path_params["eid"])
    given = request.query_params.get("after", request.headers.get("last-event-id", "0"))
    if not (given.isascii() and given.isdigit()):
        raise ApiError(400, "bad_request", f"after={given!r} must be an event id (a whole number)")
    return _event_stream(
        state, execution, int(given), {"X-Execution-Id": execution.id}, _stream_format(request) or "sse"
    )


async def cancel(request: Request) -> Response:
    session = session_of(request)
    execution = session.execution(request.path_params["eid"])
    await execution.cancel()
    session.touch()
    return json_answer(execution.summary())


SESSION_OK = json_answer_of(ref("Session"))
EXECUTION_OK = json_answer_of(ref("Execution"))
QUEUE = {
    "name": "queue",
    "in": "query",
    "schema": {"type": "string"},
    "description": "1 or true: wait for the running execution instead of a 409",
}
EXECUTED = {
    "description": "The Execution when it ended, or its events as they happen",
    "content": {**EXECUTION_OK["content"], **STREAMS},
}
AFTER = [
    {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
    {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
]
ROUTES = [
    ApiRoute(
        "/v1/sessions",
        create,
        post=Op(
            "Open a session",
            {"201": SESSION_OK, "400": ERROR, "413": ERROR, "429": BUSY, "503": ERROR},
            body=SessionRequest,
            body_required=False,
        ),
    ),
    ApiRoute(
        "/v1/sessions/{sid}",
        one_session,
        get=Op("A session", {"200": SESSION_OK, **SESSION_ERRORS}, params=[SID]),
        delete=Op("Close a session", {"200": SESSION_OK, **SESSION_ERRORS}, params=[SID]),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/keepalive",
        keepalive,
        post=Op("Push back the idle expiry", {"200": SESSION_OK, **SESSION_ERRORS}, params=[SID]),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/reset",
        reset,
        post=Op(
            "Stop what runs; a new kernel (files stay)",
            {"200": SESSION_OK, "503": ERROR, **SESSION_ERRORS},
            params=[SID],
        ),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/executions",
        execute,
        post=Op(
            "Run code in the session, one execution at a time (else 409, or wait with ?queue=1). "
            + STREAM_TEXT,
            {
                "200": EXECUTED,
                "400": ERROR,
                "409": ERROR,
                "413": ERROR,
                "429": BUSY,
                "503": ERROR,
                **SESSION_ERRORS,
            },
            body=ExecutionRequest,
            params=[SID, QUEUE],
        ),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/executions/{eid}",
        show_execution,
        get=Op("An execution's state", {"200": EXECUTION_OK, **SESSION_ERRORS}, params=[SID, EID]),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/executions/{eid}/events",
        events,
        get=Op(
            "Replay the events after ?after=N (or Last-Event-ID), then follow. " + STREAM_TEXT,
            {"200": {"description": "The events", "content": STREAMS}, "400": ERROR, **SESSION_ERRORS},
            params=[SID, EID, *AFTER],
        ),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/executions/{eid}/cancel",
        cancel,
        post=Op(
            "Kill the execution (its whole process tree)",
            {"200": EXECUTION_OK, **SESSION_ERRORS},
            params=[SID, EID],
        ),
    ),
]
