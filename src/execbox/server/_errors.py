"""The server's one error shape, and execbox's errors translated into it.

Every failure answers ``{"error": {"code", "message", "retryable"}}`` (410
adds ``reason``). The codes::

    400 bad_request        the body is not what the route takes (the message says what is wrong)
    400 invalid_limits     a limit is malformed or above the server's maximum
    400 path_escape        a path leads outside the session's workspace
    400 workspace_error    the workspace cannot do it (a folder where a file is asked for...)
    401 unauthorized       no or a wrong bearer token
    403 forbidden          a foreign Host, Origin or cross-site request (--allow-host, --allow-origin)
    404 not_found          no such route, session id never seen, execution or file
    405 method_not_allowed
    409 execution_running  the session runs another execution (retryable)
    410 session_expired    the session ended; ``reason``: ttl, idle, deleted or node_lost (--ray)
    410 execution_gone     a session's execution no longer kept; ``reason``: session_kept_bytes
                           (--session-kept-mb), kept_bytes (--kept-mb), kept_count (see _kept)
    413 too_large          a body or a file over the server's size limit, or too many JSON values
    415 unsupported_media_type  a JSON route's body sent without Content-Type: application/json
    429 busy               over --max-concurrency or --max-sessions, or the Ray cluster is full
                           (retryable, Retry-After)
    503 backend_unavailable  the backend cannot start here (the message names the fix)
    503 node_lost          (--ray) the Ray node of a stateless run was lost: retry, it goes to another
    500 internal           a bug: the message says what failed

User code that fails is not an error: it is a 200 with the result.
"""

from __future__ import annotations

import math
from typing import Any

from starlette.responses import JSONResponse

from .._errors import (
    BackendUnavailableError,
    ClusterBusyError,
    ConfigurationError,
    ExecboxError,
    ExecutorClosedError,
    NodeLostError,
    PathEscapeError,
    WorkspaceError,
)

__all__ = ["ApiError", "error_response", "from_execbox"]


class ApiError(Exception):
    """An answer in the error shape; raised by a route, rendered by the app."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.headers = headers or {}
        self.extra = extra

    def body(self) -> dict[str, Any]:
        return {
            "error": {"code": self.code, "message": self.message, "retryable": self.retryable, **self.extra}
        }


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


def from_execbox(exc: ExecboxError | OSError) -> ApiError:
    """An execbox exception (a bad call, or the infrastructure) as an answer."""
    if isinstance(exc, PathEscapeError):
        return ApiError(400, "path_escape", str(exc))
    if isinstance(exc, WorkspaceError):
        return ApiError(400, "workspace_error", str(exc))
    if isinstance(exc, ConfigurationError):
        return ApiError(400, "bad_request", str(exc))
    if isinstance(exc, BackendUnavailableError):
        return ApiError(503, "backend_unavailable", str(exc))
    if isinstance(exc, ClusterBusyError):
        return ApiError(
            429,
            "busy",
            str(exc),
            retryable=True,
            headers={"Retry-After": str(max(1, math.ceil(exc.retry_after)))},
        )
    if isinstance(exc, NodeLostError):  # a stateless run: retry, it goes to the nodes left
        return ApiError(503, "node_lost", str(exc), retryable=True)
    if isinstance(exc, ExecutorClosedError):
        return ApiError(410, "session_expired", "the session ended while the request ran", reason="deleted")
    return ApiError(500, "internal", f"{type(exc).__name__}: {exc}")
