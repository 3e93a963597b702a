"""The Starlette application: the routes, bearer-token auth, every error
in the one shape, and the lifespan (the reaper; at shutdown every session's
executor and every kept executor closed); outermost, ``ConnectionGuard``
(``_connections``: the keep-alive header, failures answered or logged);
innermost, a session's request passed to the worker process that holds it
(``_worker``)."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ._config import ServerConfig
from ._connections import ConnectionGuard
from ._errors import ApiError, error_response
from ._guard import RequestGuard
from ._malloc import give_back_big_frees
from ._openapi import API_ROUTES
from ._routes_page import PUBLIC_PATHS
from ._state import ServerState
from ._url_token import PathToken
from ._worker import SessionRouter, Worker

__all__ = ["create_app"]

OPEN_PATHS = PUBLIC_PATHS | {"/openapi.json"}
HTTP_CODES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "too_large",
    415: "unsupported_media_type",
}


class BearerAuth:
    """401 unless ``Authorization: Bearer <token>`` (compared in constant time);
    the playground's page and static files (``GET``, ``PUBLIC_PATHS``) and
    the API's description (``/openapi.json``, which the start-up line points
    at) are served to anyone: they hold no secret; the page asks for the
    token and sends it itself."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode() if token else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        public = scope.get("method") in ("GET", "HEAD") and scope.get("path") in OPEN_PATHS
        if scope["type"] == "http" and self.expected is not None and not public:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                said = (
                    "the bearer token sent is not this server's: send Authorization: Bearer <token> "
                    "(SandboxFusion's /run_code: or the URL /t/<token>/run_code) with the one it was started "
                    "with (--token / EXECBOX_TOKEN, or the one in the link it printed)"
                    if given
                    else "a bearer token is required: Authorization: Bearer <token> "
                    "(SandboxFusion's /run_code: or the URL /t/<token>/run_code) "
                    "(the server's --token / EXECBOX_TOKEN)"
                )
                error = ApiError(401, "unauthorized", said, headers={"WWW-Authenticate": "Bearer"})
                await error_response(error)(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    code = HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = {
        404: f"no route {request.method} {request.url.path}: see /openapi.json",
        405: f"{request.method} is not allowed on {request.url.path}: see /openapi.json",
    }.get(exc.status_code, str(exc.detail))
    return error_response(ApiError(exc.status_code, code, message, headers=dict(exc.headers or {})))


async def _internal(request: Request, exc: Exception) -> Response:
    return error_response(ApiError(500, "internal", f"{type(exc).__name__}: {exc}"))


def create_app(config: ServerConfig, worker: Worker | None = None) -> ASGIApp:
    """The ASGI app of ``execbox serve`` (of its worker process ``worker``)."""
    give_back_big_frees()  # a block's output in MiB buffers: freed, given back (_malloc)
    state = ServerState(config, worker)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        state.load.attach(loop)
        reaper = loop.create_task(state.sessions.reap_forever(config.reap_interval_s))
        try:
            yield
        finally:
            reaper.cancel()
            await state.aclose()

    app = Starlette(
        routes=list(API_ROUTES),
        exception_handlers={ApiError: _api_error, HTTPException: _http_error, Exception: _internal},
        lifespan=lifespan,
    )
    app.state.execbox = state
    # a session's request waits at most for the run before it and its own, each with its line
    passed_on_for_s = 2 * (config.max_timeout_s + config.max_queue_wait_s) + 60
    routed = SessionRouter(app, state.worker, passed_on_for_s)
    guarded = RequestGuard(
        BearerAuth(routed, config.token), config.host, config.allow_hosts, config.allow_origins
    )
    return ConnectionGuard(PathToken(guarded), config.keep_alive_s)  # PathToken: /t/<token>/run_code


def routes_of(app: Any) -> list[tuple[str, str]]:
    """(method, path) of every route (for the OpenAPI test)."""
    inner = app
    while isinstance(inner, (ConnectionGuard, PathToken, RequestGuard, BearerAuth, SessionRouter)):
        inner = inner.app
    return [(method, route.path) for route in inner.routes for method in sorted(route.methods - {"HEAD"})]
