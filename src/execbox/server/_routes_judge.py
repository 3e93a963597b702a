"""``POST /v1/judge``: a program against test cases, a verdict each
(``Executor.judge`` on a checked-out executor, as ``/v1/run`` runs).

Body: ``{code, language, cases: [{stdin?, expected_stdout? | checker?: {code,
language?}, name?}], compare?, tolerance?, stop_on_failure?, limits?,
backend?}``; the answer is ``JudgeResult.to_dict()``. A request holds one
slot of the server's concurrency for all its cases, which run one after
another; at most ``MAX_CASES`` cases. A client that goes away cancels it
(``unless_gone``): waiting in the server's line, it leaves it and never
runs; running, the case that runs is killed, the rest are not run, the
slot is given back.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._errors import ConfigurationError, ExecboxError
from .._judge import as_cases
from ._bodies import MAX_CASES, JudgeRequest, checked
from ._disconnect import unless_gone
from ._errors import ApiError, from_execbox
from ._openapi_ops import BUSY, ERROR, ApiRoute, Op, json_answer_of
from ._openapi_schemas import ref
from ._pieces import json_answer
from ._state import state_of
from ._wire import backend_of, gpus_of, limits_of, read_json

__all__ = ["JUDGE_ROUTES", "MAX_CASES"]


async def judge(request: Request) -> Response:
    state = state_of(request)
    config = state.config
    body = checked(JudgeRequest, await read_json(request, config.max_upload_bytes))
    code, language = body.code, body.language
    options: dict[str, Any] = {
        "compare": body.compare or "lines",
        "tolerance": 1e-6 if body.tolerance is None else body.tolerance,
        "stop_on_failure": True if body.stop_on_failure is None else body.stop_on_failure,
    }
    try:  # a case's fields are checked by the model; what they mean together (a checker or an output) here
        cases = as_cases([case.model_dump(exclude_none=True) for case in body.cases])
    except ConfigurationError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None
    limits = limits_of(body.limits, config)
    backend = backend_of(body.backend, config)
    gpus = gpus_of(body.gpus, config, backend)

    async def judged() -> dict[str, Any]:
        try:
            executor = await state.pool.acquire(backend, limits, gpus)
        except (ExecboxError, OSError) as exc:
            raise from_execbox(exc) from None
        finished = False
        try:
            result = await executor.ajudge(code, language, cases, **options)
            finished = True
        except ConfigurationError as exc:  # a language this backend cannot run, stdin it cannot give
            finished = True
            raise ApiError(400, "bad_request", str(exc)) from None
        except (ExecboxError, OSError) as exc:
            raise from_execbox(exc) from None
        finally:
            await asyncio.shield(state.pool.release(executor, reusable=finished))
        return result.to_dict()

    return json_answer(await unless_gone(request, state.load.in_slot(judged)))


JUDGE_ROUTES = [
    ApiRoute(
        "/v1/judge",
        judge,
        post=Op(
            "Judge a program against test cases: a verdict per case and overall",
            {"200": json_answer_of(ref("JudgeResult")), "400": ERROR, "413": ERROR, "429": BUSY},
            body=JudgeRequest,
        ),
    )
]
