"""The stateless routes: ``GET /v1/info``, ``POST /v1/run`` and
``POST /v1/batch`` (NDJSON, one line per request as it finishes).

A run whose client goes away is cancelled (``unless_gone`` for ``/v1/run``
and a batch's admission; a batch's stream is cancelled by Starlette on the
disconnect): waiting in the server's line, it leaves the line and never
runs (issue 42); running, its block is killed, its executor not reused, its
slot freed (security issue 39)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from .._errors import ExecboxError, WorkspaceError
from .._version import __version__
from ._bodies import BatchRequest, RunRequest, checked
from ._disconnect import unless_gone
from ._errors import ApiError, from_execbox
from ._openapi_ops import BUSY, ERROR, ApiRoute, Op, json_answer_of
from ._openapi_schemas import BATCH_LINE, ref
from ._pieces import json_answer, json_line
from ._state import ServerState, state_of
from ._wire import RunJob, encode_file, read_file, read_json, run_request

__all__ = ["ROUTES"]


async def info(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    backends = await state.backends()
    languages = sorted({lang for b in backends.values() for lang in b.get("languages", ())})
    return JSONResponse(
        {
            "version": __version__,
            "default_backend": config.backend,
            "ray": config.ray_address,
            "backends": backends,
            "languages": languages,
            "limits": config.limits_info(),
            "capabilities": {
                "sessions": True,
                "batch": True,
                "files": True,
                "streaming": ["text/event-stream", "application/x-ndjson"],
                "resume": True,
                "cancel": True,
                "max_upload_bytes": config.max_upload_bytes,
                "session_ttl_s": {"default": config.session_ttl_s, "maximum": config.max_session_ttl_s},
                "session_idle_ttl_s": {"default": config.session_idle_ttl_s},
                "sse_keepalive_s": config.keepalive_s,
            },
            "load": {
                "sessions": state.sessions.total(),
                "max_sessions": config.max_sessions,
                "running": state.load.running,
                "queued": state.load.queued,
                "max_concurrency": config.max_concurrency,
                "max_queued": config.max_queued,
                "max_queue_wait_s": config.max_queue_wait_s,
                "admitted": state.load.admitted,  # slots given, in all
                "abandoned": state.load.abandoned,  # left the line: their client went away first
                "longest_wait_s": round(state.load.longest_wait_s(), 3),
                "retry_after_s": state.load.retry_after_s(),
                "idle_executors": state.pool.idle,  # this worker's, as are "pools"
                "workers": config.workers,
                "worker": state.worker.index,
            },
            "pools": await state.pools(),
        }
    )


async def run(request: Request) -> Response:
    state = state_of(request)
    todo = run_request(await read_json(request, state.config.max_upload_bytes), state.config)
    return json_answer(await unless_gone(request, state.load.in_slot(lambda: _run_one(state, todo))))


async def _run_one(state: ServerState, todo: RunJob) -> dict[str, Any]:
    """Run one request on a checked-out executor: its files in, the result
    (and ``file_contents`` of ``fetch_files``) out."""
    try:
        executor = await state.pool.acquire(todo.backend, todo.limits, todo.gpus)
    except (ExecboxError, OSError) as exc:
        raise from_execbox(exc) from None
    finished = False
    try:
        if todo.files:  # most runs send none: no hop to a thread for nothing
            await asyncio.to_thread(_write_files, executor, todo.files)
        result = await executor.arun(todo.blocks)
        answer = result.to_dict()
        if todo.fetch_files:
            answer["file_contents"] = await asyncio.to_thread(
                _fetch, executor.workspace, todo.fetch_files, state.config.max_upload_bytes
            )
        finished = True
        return answer
    except (ExecboxError, OSError) as exc:
        raise from_execbox(exc) from None
    finally:
        await asyncio.shield(state.pool.release(executor, reusable=finished))


def _write_files(executor: Any, files: dict[str, bytes]) -> None:
    executor.files.write_many(files)  # a kept executor has started: the blocks' own


def _fetch(workspace: Any, paths: list[str], limit: int) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for path in paths:
        try:
            found[path] = encode_file(read_file(workspace, path, limit))
        except ApiError as exc:
            found[path] = {"error": exc.message}
        except WorkspaceError as exc:
            found[path] = {"error": str(exc)}
        except OSError as exc:
            found[path] = {"error": f"cannot read {path!r}: {exc.strerror}"}
    return found


async def batch(request: Request) -> Response:
    state = state_of(request)
    body = checked(BatchRequest, await read_json(request, state.config.max_upload_bytes))
    items = body.requests  # each checked in its turn (a bad one answers its own line)
    if not isinstance(items, list) or not items:
        raise ApiError(400, "bad_request", "'requests' must be a non-empty list of run requests")
    width = state.config.max_concurrency if body.max_concurrency is None else body.max_concurrency
    # the first request's slot: 429 when the server and its line are full (its client gone: out of the line)
    await unless_gone(request, state.load.enter())
    return StreamingResponse(_batch_lines(state, items, width), media_type="application/x-ndjson")


async def _batch_lines(state: ServerState, items: list[Any], width: int) -> AsyncIterator[bytes]:
    gate = asyncio.Semaphore(width)
    first = [True]

    async def one(index: int, item: Any) -> dict[str, Any]:
        async with gate:
            if first[0]:
                first[0] = False  # admitted with the batch
            else:
                await state.load.acquire()
            try:
                return {"index": index, **await _run_one(state, run_request(item, state.config))}
            except ApiError as exc:
                return {"index": index, **exc.body()}
            finally:
                state.load.release()

    tasks = [asyncio.ensure_future(one(i, item)) for i, item in enumerate(items)]
    try:
        for done in asyncio.as_completed(tasks):
            for piece in json_line(await done):
                yield piece
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if first[0]:  # no request took the slot the batch was admitted with
            state.load.release()


ROUTES = [
    ApiRoute(
        "/v1/info",
        info,
        get=Op(
            "Version, backends, languages, limits, capabilities, load, and pools: per "
            "executor held (use: idle, running or session) that has a warm pool, its "
            "health (boxes, boxes_ready, boxes_cleaning, boxes_made, boxes_replaced, "
            "refills_failed, zygote_restarts, stalls...); [] when none has one",
            {"200": json_answer_of(ref("Info"))},
        ),
    ),
    ApiRoute(
        "/v1/run",
        run,
        post=Op(
            "Run code in a fresh workspace",
            {
                "200": json_answer_of(ref("ExecutionResult")),
                "400": ERROR,
                "413": ERROR,
                "429": BUSY,
                "503": ERROR,
            },
            body=RunRequest,
        ),
    ),
    ApiRoute(
        "/v1/batch",
        batch,
        post=Op(
            "Run many requests; NDJSON, one line per request as it finishes (with index)",
            {
                "200": {
                    "description": "NDJSON: per request, its index and its result, or its error "
                    "(a request that is not valid answers its own line)",
                    "content": {"application/x-ndjson": {"schema": BATCH_LINE}},
                },
                "400": ERROR,
                "413": ERROR,
                "429": BUSY,
            },
            body=BatchRequest,
        ),
    ),
]
