"""Running the app under uvicorn. SIGTERM and SIGINT stop it: uvicorn
stops taking connections, gives open ones ``SHUTDOWN_GRACE_S`` (a stream
that follows a long execution would otherwise hold the shutdown forever),
then the lifespan closes every session's executor and every kept one, so
that no process, jail or kernel is left behind.

Connections: uvicorn's h11 protocol with execbox's keep-alive
(``_connections``: idle ones kept ``ServerConfig.keep_alive_s``), its log
lines (``execbox.server.*``) beside uvicorn's on stderr, at ``log_level``."""

from __future__ import annotations

import copy
from typing import Any

from ._app import create_app
from ._config import ServerConfig
from ._connections import protocol_class

__all__ = ["SHUTDOWN_GRACE_S", "log_config", "serve"]

SHUTDOWN_GRACE_S = 5


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging, and execbox's server loggers on its stderr handler (with their names)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["execbox"] = {"()": "uvicorn.logging.DefaultFormatter",
                                       "fmt": "%(levelprefix)s %(name)s: %(message)s", "use_colors": None}
    config["handlers"]["execbox"] = {"formatter": "execbox", "class": "logging.StreamHandler",
                                     "stream": "ext://sys.stderr"}
    config["loggers"]["execbox.server"] = {"handlers": ["execbox"], "level": log_level.upper(), "propagate": False}
    return config


def serve(config: ServerConfig, *, log_level: str = "warning") -> None:
    import uvicorn

    uvicorn.run(create_app(config), host=config.host, port=config.port, log_level=log_level,
                log_config=log_config(log_level), http=protocol_class(), timeout_keep_alive=config.keep_alive_s,
                timeout_graceful_shutdown=SHUTDOWN_GRACE_S, lifespan="on")
