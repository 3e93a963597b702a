"""``POST /v1/judge``: a program against test cases, a verdict each
(``Executor.judge`` on a checked-out executor, as ``/v1/run`` runs).

Body: ``{code, language, cases: [{stdin?, expected_stdout? | checker?: {code,
language?}, name?}], compare?, tolerance?, stop_on_failure?, limits?,
backend?}``; the answer is ``JudgeResult.to_dict()``. A request holds one
slot of the server's concurrency for all its cases, which run one after
another; at most ``MAX_CASES`` cases.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import ConfigurationError, ExecboxError
from .._judge import COMPARE_MODES, as_cases
from ._errors import ApiError, from_execbox
from ._state import state_of
from ._wire import backend_of, field_of, gpus_of, limits_of, read_json

__all__ = ["JUDGE_ROUTES", "MAX_CASES"]

MAX_CASES = 1000


async def judge(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    data = await read_json(request, config.max_upload_bytes)
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "a judge request must be a JSON object")
    code = field_of(data, "code", str)
    language = field_of(data, "language", str)
    if code is None or language is None:
        raise ApiError(400, "bad_request", "give 'code' and 'language' (and 'cases')")
    raw = field_of(data, "cases", list) or []
    if len(raw) > MAX_CASES:
        raise ApiError(400, "bad_request", f"'cases' has {len(raw)} cases: at most {MAX_CASES} a request")
    options: dict[str, Any] = {
        "compare": field_of(data, "compare", str, "lines"),
        "tolerance": field_of(data, "tolerance", (int, float), 1e-6),
        "stop_on_failure": field_of(data, "stop_on_failure", bool, True),
    }
    if options["compare"] not in COMPARE_MODES:
        raise ApiError(400, "bad_request", f"'compare' must be one of {', '.join(COMPARE_MODES)}")
    try:
        cases = as_cases(raw)
    except ConfigurationError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    limits = limits_of(data, config)
    backend = backend_of(data, config)
    gpus = gpus_of(data, config, backend)
    await state.load.enter()
    try:
        try:
            executor = await state.pool.acquire(backend, limits, gpus)
        except (ExecboxError, OSError) as exc:
            raise from_execbox(exc) from None
        finished = False
        try:
            result = await executor.ajudge(code, language, cases, **options)  # a client gone: the case killed
            finished = True
        except ConfigurationError as exc:  # a language this backend cannot run, stdin it cannot give
            finished = True
            raise ApiError(400, "bad_request", str(exc)) from None
        except (ExecboxError, OSError) as exc:
            raise from_execbox(exc) from None
        finally:
            await asyncio.shield(state.pool.release(executor, reusable=finished))
        return JSONResponse(result.to_dict())
    finally:
        state.load.release()


JUDGE_ROUTES = [Route("/v1/judge", judge, methods=["POST"])]
