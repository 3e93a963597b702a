"""``execbox serve``: execbox as an HTTP service (Starlette + uvicorn,
execbox's ``server`` extra).

    config = ServerConfig(backend="sandbox", max_concurrency=8)
    serve(config)                      # or uvicorn with create_app(config)

Stateless runs (``/v1/run``, ``/v1/batch``), sessions that keep an
executor (its workspace, a Jupyter kernel's state) with a ttl and an idle
ttl, executions streamed as server-sent events and resumable, the
session's files, and back-pressure as a bounded line, then 429. The routes and their
errors: ``_openapi.py`` (served at ``/openapi.json``) and ``_errors.py``.

Modules: ``_config`` (what a server allows), ``_wire`` (bodies, files,
SSE framing), ``_errors`` (the error shape), ``_load`` (slots, the line, 429),
``_executors`` (kept executors for stateless runs), ``_sessions`` and
``_executions`` (their lifecycles), ``_routes_*`` (the handlers), ``_app``
(auth, errors, lifespan), ``_connections`` (keep-alive, and the log of
each connection closed early), ``_serve`` (uvicorn, its logging, signals).
"""

from typing import TYPE_CHECKING, Any

from ._config import ServerConfig

if TYPE_CHECKING:
    from ._app import create_app
    from ._serve import serve

__all__ = ["ServerConfig", "create_app", "serve"]


def __getattr__(name: str) -> Any:
    """``create_app`` and ``serve`` imported when asked: ``ServerConfig`` (and
    ``execbox serve --help``, built from its fields) needs no server extra."""
    if name == "create_app":
        from ._app import create_app

        return create_app
    if name == "serve":
        from ._serve import serve

        return serve
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
