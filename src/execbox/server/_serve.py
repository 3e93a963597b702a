"""Running the app under uvicorn. SIGTERM and SIGINT stop it: uvicorn
stops taking connections, gives open ones ``SHUTDOWN_GRACE_S`` (a stream
that follows a long execution would otherwise hold the shutdown forever),
then the lifespan closes every session's executor and every kept one, so
that no process, jail or kernel is left behind.

The socket is bound first, then one line on stderr says where the server
is, as Jupyter does: the playground's URL carrying a token made for this
run (``/?token=...``: the page keeps it for its tab and takes it out of
the address bar), or which token it takes, or a warning that it takes none.

With ``config.workers`` above 1 the supervisor (``_supervisor``) runs that
many worker processes on the one socket (``worker_main``), sharing the
limits (``_board``) and passing a session's requests to its worker
(``_worker``).

Connections: uvicorn's h11 protocol with execbox's keep-alive
(``_connections``: idle ones kept ``ServerConfig.keep_alive_s``), its log
lines (``execbox.server.*``) beside uvicorn's on stderr, at ``log_level``."""

from __future__ import annotations

import contextlib
import copy
import errno
import logging.config
import os
import socket
import sys
from typing import Any, TextIO
from urllib.parse import quote

from ._app import create_app
from ._config import ServerConfig
from ._connections import protocol_class
from ._supervisor import STARTUP_FAILURE, supervise
from ._url_token import run_code_url
from ._worker import Worker

__all__ = ["SHUTDOWN_GRACE_S", "announcement", "log_config", "page_url", "serve", "settings", "worker_main"]

SHUTDOWN_GRACE_S = 5


def log_config(log_level: str) -> dict[str, Any]:
    """uvicorn's logging, and execbox's server loggers on its stderr handler (with their names)."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["execbox"] = {
        "()": "uvicorn.logging.DefaultFormatter",
        "fmt": "%(levelprefix)s %(name)s: %(message)s",
        "use_colors": None,
    }
    config["handlers"]["execbox"] = {
        "formatter": "execbox",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stderr",
    }
    config["loggers"]["execbox.server"] = {
        "handlers": ["execbox"],
        "level": log_level.upper(),
        "propagate": False,
    }
    return config


def page_url(config: ServerConfig, port: int | None = None, *, with_token: bool = True) -> str:
    """The playground's URL on this machine (a wildcard ``--host`` reached
    on loopback), with ``?token=`` when ``with_token`` and a token is set."""
    host = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}.get(config.host, config.host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    url = f"http://{host}:{config.port if port is None else port}/"
    return url + f"?token={quote(config.token, safe='')}" if with_token and config.token else url


def announcement(config: ServerConfig, port: int, name: str = "execbox serve", what: str = "") -> list[str]:
    """The lines printed once the socket is bound: where, and how to
    authenticate; then the URL of SandboxFusion's ``/run_code`` to paste
    into a client that takes a URL alone (veRL): the token in it
    (``_url_token``) where it was made for this run, else where it goes."""
    where = f" on the Ray cluster at {config.ray_address}" if config.ray_address else ""
    workers = f", {config.workers} worker processes" if config.workers > 1 else ""
    about = f"backend {config.backend}{where}{workers}"
    if config.token_generated:
        lines = [
            f"{name}: {page_url(config, port)}",
            f"  ({about}; open the link above for the playground{what}; API clients send "
            "Authorization: Bearer <the token in it>, or set EXECBOX_TOKEN to it; the token is made for "
            "this run and printed only here; API at /openapi.json; Ctrl-C stops)",
        ]
    elif config.token:
        lines = [
            f"{name}: {page_url(config, port, with_token=False)} ({about}; bearer token required: the one "
            f"given by --token / EXECBOX_TOKEN{what}; API at /openapi.json; Ctrl-C stops)"
        ]
    else:
        lines = [
            f"{name}: {page_url(config, port)} ({about}; no token{what}; API at /openapi.json; Ctrl-C stops)",
            f"{name}: WARNING: --no-token: every user and program on this machine can run code through this "
            "server (with --backend local, as its user, unjailed); web pages still cannot (Host and Origin "
            "are checked), and a session stays its key's. Drop --no-token to require a token",
        ]
    base = page_url(config, port, with_token=False)
    if config.token_generated:
        run_code = f"sandbox_fusion.url={run_code_url(base, config.token)}"
    elif config.token:
        run_code = f"sandbox_fusion.url={base}t/<token>/run_code (<token>: yours, percent-encoded)"
    else:
        run_code = f"sandbox_fusion.url={run_code_url(base, None)}"
    lines.append(f"  (SandboxFusion's /run_code, as veRL's reward takes it: {run_code})")
    return lines


def settings(app: Any, config: ServerConfig, log_level: str) -> Any:
    """uvicorn's settings for ``app``: execbox's connections, logging and shutdown."""
    import uvicorn

    keep_alive: Any = config.keep_alive_s  # typed int by uvicorn, used as seconds (call_later): a float works
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level=log_level,
        log_config=log_config(log_level),
        http=protocol_class(),
        timeout_keep_alive=keep_alive,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
        lifespan="on",
    )


def serve(
    config: ServerConfig,
    *,
    log_level: str = "warning",
    name: str = "execbox serve",
    what: str = "",
    stream: TextIO | None = None,
) -> None:
    """Bind, print the ``announcement`` on ``stream`` (stderr), serve until
    SIGTERM or SIGINT: in this process, or in ``config.workers`` worker
    processes (``_supervisor``)."""
    import uvicorn

    single = settings(create_app(config) if config.workers == 1 else None, config, log_level)
    sock = bind_socket(config)  # a port taken: one line naming --port (uvicorn's: its log, exit 3)
    port = sock.getsockname()[1]
    print("\n".join(announcement(config, port, name, what)), file=stream or sys.stderr, flush=True)
    if config.workers > 1:
        logging.config.dictConfig(log_config(log_level))
        try:
            status = supervise(config, sock, worker_main, log_level)
        finally:
            sock.close()
        if status:
            raise SystemExit(status)
        return
    server = uvicorn.Server(single)
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)  # uvicorn's: the lifespan failed (said on stderr)


def bind_socket(config: ServerConfig) -> socket.socket:
    """The listening address bound as uvicorn binds it (``Config.bind_socket``),
    or ``ConfigurationError`` saying what to change."""
    from .._errors import ConfigurationError

    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family=family)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"cannot listen on {config.host} port {config.port}: {exc.strerror or exc}: give another "
            "with --port (0 picks a free one), or stop what holds it"
            + (" (--host: an address of this machine)" if exc.errno == errno.EADDRNOTAVAIL else "")
        ) from None
    sock.set_inheritable(True)
    return sock


def worker_main(config: ServerConfig, worker: Worker, sock: socket.socket, log_level: str) -> None:
    """One worker process: the shared socket and its own Unix socket (the
    requests other workers pass on), until SIGTERM."""
    import uvicorn

    own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path = worker.socket_path(worker.index)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # the socket of the worker this one replaces
    own.bind(path)
    os.chmod(path, 0o600)
    own.listen(1024)
    server = uvicorn.Server(settings(create_app(config, worker), config, log_level))
    try:
        server.run(sockets=[sock, own])
    except KeyboardInterrupt:
        pass
    finally:
        own.close()
        sock.close()
    if not server.started:
        raise SystemExit(STARTUP_FAILURE)
