"""``execbox serve``: execbox as an HTTP service (see ``execbox.server``)."""

from __future__ import annotations

import argparse
import os

from .._errors import ConfigurationError, install_hint
from .._models import Limits
from ..backends import DEFAULT_BACKEND, backend_names

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "serve",
        help="serve execbox over HTTP (runs, sessions, streamed output, files)",
        description="Serve execbox over HTTP: /v1/run, /v1/batch, sessions with streamed executions "
        "and files; the API is at /openapi.json. Needs the server extra: " + install_hint("server") + ".",
    )
    cmd.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    cmd.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    cmd.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"where code runs: {', '.join(backend_names())} (default: {DEFAULT_BACKEND})",
    )
    cmd.add_argument(
        "--backends",
        default="",
        metavar="A,B",
        help="other backends a request may ask for (default: --backend alone)",
    )
    cmd.add_argument(
        "--token",
        default=os.environ.get("EXECBOX_TOKEN") or None,
        help="bearer token every API request must carry (default: $EXECBOX_TOKEN, else a random one "
        "made at start and printed once, in the playground's link)",
    )
    cmd.add_argument(
        "--no-token",
        action="store_true",
        help="take no token (loopback only): every user and program on this machine may then run code as you",
    )
    cmd.add_argument(
        "--max-sessions", type=int, default=64, metavar="N", help="open sessions at most (default: 64)"
    )
    cmd.add_argument(
        "--max-concurrency",
        type=int,
        default=8,
        metavar="N",
        help="executions running at once at most; past it, a run waits in line (default: 8)",
    )
    cmd.add_argument(
        "--workers",
        default="1",
        metavar="N|auto",
        help="processes that answer requests, each with its own executors, sharing --max-concurrency, "
        "--max-queue and --max-sessions (a session stays in the one that made it); auto: one per "
        "core this process may use (default: 1)",
    )
    cmd.add_argument(
        "--max-queue",
        type=int,
        default=None,
        metavar="N",
        help="runs waiting for a slot at most; past it, 429 with Retry-After (default: 8x --max-concurrency)",
    )
    cmd.add_argument(
        "--max-queue-wait",
        type=float,
        default=30.0,
        metavar="S",
        help="the longest a run waits in line before its 429 (default: 30)",
    )
    cmd.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds per block when a request sets none (default: 60)",
    )
    cmd.add_argument(
        "--max-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="the most a request may ask per block (default: 600)",
    )
    cmd.add_argument("--allow-network", action="store_true", help="let requests ask for limits.network true")
    cmd.add_argument(
        "--allow-gpus",
        default=None,
        metavar="all|0,1",
        help="NVIDIA GPUs requests may ask for with gpus (sandbox, docker); default: none",
    )
    cmd.add_argument(
        "--max-upload-mb",
        type=int,
        default=64,
        metavar="MB",
        help="largest body, file upload or download (default: 64)",
    )
    cmd.add_argument(
        "--session-ttl",
        type=float,
        default=3600.0,
        metavar="S",
        help="a session's lifetime when it asks none (default: 3600)",
    )
    cmd.add_argument(
        "--idle-ttl",
        type=float,
        default=600.0,
        metavar="S",
        help="a session idle this long ends, when it asks none (default: 600)",
    )
    cmd.add_argument(
        "--max-session-ttl",
        type=float,
        default=86400.0,
        metavar="S",
        help="the most ttl_s a session may ask (default: 86400)",
    )
    cmd.add_argument(
        "--session-kept-mb",
        type=int,
        default=8,
        metavar="MB",
        help="what a session's finished executions (results and events, kept for replay) may hold; "
        "past it its oldest are dropped, its latest kept (default: 8)",
    )
    cmd.add_argument(
        "--kept-mb",
        type=int,
        default=16,
        metavar="MB",
        help="what the finished executions of all sessions may hold, per server process (each of "
        "--workers); past it the oldest are dropped (default: 16)",
    )
    cmd.add_argument(
        "--ray",
        default=None,
        metavar="ADDRESS",
        help="run every executor on this Ray cluster (auto, HOST:PORT or ray://...): stateless runs "
        "on its least loaded node, a session pinned to one node (the ray extra: " + install_hint("ray") + ")",
    )
    cmd.add_argument(
        "--sse-keepalive",
        type=float,
        default=15.0,
        metavar="S",
        help="period of the ': keepalive' comment in event streams (default: 15)",
    )
    cmd.add_argument(
        "--keep-alive",
        type=float,
        default=75.0,
        metavar="S",
        help="seconds an idle HTTP connection is kept open (default: 75; at least 5, above the idle "
        "time clients keep a pooled connection, so that they close it first)",
    )
    cmd.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name (NAME or NAME:PORT) to serve besides 127.0.0.1, localhost, [::1] and --host; "
        "others are refused (DNS rebinding); repeatable",
    )
    cmd.add_argument(
        "--allow-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin (such as https://app.example) that may call the API besides the "
        "server's own page; others are refused (cross-site requests); repeatable",
    )
    cmd.add_argument(
        "--log-level",
        default="warning",
        choices=["critical", "error", "warning", "info", "debug"],
        help="what the server logs on stderr (default: warning; info: clients gone before their "
        "answer; debug: every connection it closes)",
    )
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    try:
        from ..server import ServerConfig, serve
    except ImportError as exc:
        raise ConfigurationError(
            f"execbox serve needs the server extra: {install_hint('server')} ({exc})"
        ) from exc
    config = ServerConfig(
        host=args.host,
        port=args.port,
        backend=args.backend,
        backends=tuple(b.strip() for b in args.backends.split(",") if b.strip()),
        token=args.token,
        no_token=args.no_token,
        max_sessions=args.max_sessions,
        max_concurrency=args.max_concurrency,
        max_queued=args.max_queue,
        max_queue_wait_s=args.max_queue_wait,
        default_limits=Limits(timeout_s=args.timeout),
        max_timeout_s=args.max_timeout,
        allow_network=args.allow_network,
        allow_gpus=args.allow_gpus,
        max_upload_bytes=args.max_upload_mb << 20,
        session_ttl_s=args.session_ttl,
        session_idle_ttl_s=args.idle_ttl,
        max_session_ttl_s=args.max_session_ttl,
        session_kept_bytes=args.session_kept_mb << 20,
        kept_bytes=args.kept_mb << 20,
        keepalive_s=args.sse_keepalive,
        keep_alive_s=args.keep_alive,
        ray_address=args.ray,
        allow_hosts=tuple(args.allow_host),
        allow_origins=tuple(args.allow_origin),
        workers=_workers(args.workers),
    )
    serve(config, log_level=args.log_level)  # prints where, with the token made for this run
    return 0


def _workers(given: str) -> int:
    from ..server._config import MAX_WORKERS

    if given == "auto":
        return min(len(os.sched_getaffinity(0)), MAX_WORKERS)
    try:
        return int(given)
    except ValueError:
        raise ConfigurationError(
            f"--workers {given!r}: give a whole number from 1 to {MAX_WORKERS}, or auto"
        ) from None
