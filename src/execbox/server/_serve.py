"""Running the app under uvicorn. SIGTERM and SIGINT stop it: uvicorn
stops taking connections, gives open ones ``SHUTDOWN_GRACE_S`` (a stream
that follows a long execution would otherwise hold the shutdown forever),
then the lifespan closes every session's executor and every kept one, so
that no process, jail or kernel is left behind."""

from __future__ import annotations

from ._app import create_app
from ._config import ServerConfig

__all__ = ["SHUTDOWN_GRACE_S", "serve"]

SHUTDOWN_GRACE_S = 5


def serve(config: ServerConfig, *, log_level: str = "warning") -> None:
    import uvicorn

    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level=log_level,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, lifespan="on")
