"""The OpenAPI 3.1 document served at ``/openapi.json``, built from the
app's routes (``API_ROUTES``): each declares its operations where it is
registered (``_openapi_ops.ApiRoute``), so the document names every route
of the app and only those; its request and answer bodies generated from
the typed models that the routes validate with (``_bodies``, ``_answer_models``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._version import __version__
from ._openapi_ops import ApiRoute, Op, json_answer_of
from ._openapi_schemas import ref, schemas
from ._routes_files import ROUTES as FILE_ROUTES
from ._routes_judge import JUDGE_ROUTES
from ._routes_page import ROUTES as PAGE_ROUTES
from ._routes_run import ROUTES as RUN_ROUTES
from ._routes_run_code import RUN_CODE_ROUTES
from ._routes_sessions import ROUTES as SESSION_ROUTES

__all__ = ["API_ROUTES", "BODIES", "openapi"]

KEYED: list[dict[str, list[str]]] = [
    {"bearer": [], "sessionKey": []}
]  # a session's routes: the server's token and the session's key


async def _served(request: Request) -> Response:
    return JSONResponse(openapi())


# every route of the app, in the order they are matched, each with its operations
API_ROUTES: list[ApiRoute] = [
    ApiRoute(
        "/openapi.json",  # no secret in it: served without the token, as the page is
        _served,
        get=Op(
            "This document (no token needed)",
            {"200": json_answer_of({"type": "object"})},
            extra={"security": []},
        ),
    ),
    *RUN_ROUTES,
    *JUDGE_ROUTES,
    *RUN_CODE_ROUTES,
    *SESSION_ROUTES,
    *FILE_ROUTES,
    *PAGE_ROUTES,
]


def _documented(path: str) -> str:
    """A route's path as OpenAPI writes it (``{path:path}`` -> ``{path}``)."""
    return re.sub(r"\{(\w+):\w+\}", r"{\1}", path)


# (path, method) -> the model its JSON body is validated with
BODIES: dict[tuple[str, str], type[BaseModel]] = {
    (_documented(route.path), method): op.body
    for route in API_ROUTES
    for method, op in route.ops.items()
    if isinstance(op, Op) and op.body is not None
}


def _paths() -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for route in API_ROUTES:
        path = _documented(route.path)
        ops = paths.setdefault(path, {})
        for method, op in route.ops.items():
            ops[method] = op.document() if isinstance(op, Op) else op
            if path.startswith("/v1/sessions/{sid}"):
                ops[method]["security"] = KEYED
    return paths


def openapi() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "execbox",
            "version": __version__,
            "description": (
                "Run code written by language models. Errors: {error: {code, message, retryable}}."
            ),
        },
        "components": {
            "schemas": schemas(),
            "responses": {"Error": json_answer_of(ref("Error"), "An error (see error.code)")},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the server's token (--token, EXECBOX_TOKEN, or made at start and printed "
                    "in the playground's link)",
                },
                "sessionKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Execbox-Session-Key",
                    "description": "a session's key, answered once by POST /v1/sessions",
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": _paths(),
    }
