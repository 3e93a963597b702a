"""What one server allows: its backends, limits, sizes and session times
(``ServerConfig``), checked once where it is made."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigurationError, install_hint
from .._gpus import check_gpu_backend, parse_gpus
from .._models import Limits, MiB, default_memory_mb
from ..backends import DEFAULT_BACKEND, backend_names
from ._config_checks import MIN_KEEP_ALIVE_S, is_loopback, settle
from ._flags import flag, in_mib, workers

__all__ = ["KEPT_BYTES", "MIN_KEEP_ALIVE_S", "SESSION_KEPT_BYTES", "ServerConfig", "is_loopback"]

# what finished executions kept for replay may hold, per session and per server process (see _kept):
# within the 64 MiB beside the floods that run (four under a 1 MiB cap: about 30 MiB at their peak)
SESSION_KEPT_BYTES = 8 * MiB
KEPT_BYTES = 16 * MiB


@dataclass(frozen=True, kw_only=True)
class ServerConfig:
    """The settings of ``execbox serve`` (each names its flag).

    - ``backend``: what runs a request that names none (``--backend``);
      ``backends``: what a request may name (``--backends``; default: ``backend`` alone).
    - ``token``: the bearer token every API request carries (``--token`` /
      ``EXECBOX_TOKEN``). None: a random one is made (``token_generated``
      then says so; ``execbox serve`` prints it once in the page's link), as
      Jupyter does, so that no server runs code for whoever can connect.
      ``no_token``: serve with none, knowingly (``--no-token``): loopback
      only, where every user and program of this machine may then run code
      as the server's user.
    - ``max_sessions`` / ``max_concurrency``: past them, 429 with Retry-After
      (a run past ``max_concurrency`` first waits in a line of ``max_queued``,
      default 8x ``max_concurrency``, for ``max_queue_wait_s`` at most:
      ``--max-queue``, ``--max-queue-wait``; ``max_queued=0`` refuses at once).
    - ``default_limits``; ``max_timeout_s``, ``max_memory_mb``,
      ``max_output_bytes``: the most a request may ask; ``allow_network``:
      whether a request may ask ``network: true`` (``--allow-network``);
      ``allow_gpus``: the GPUs a request may ask with ``gpus`` ("all" or
      indices and UUIDs, ``--allow-gpus``; None: none).
    - ``max_upload_bytes``: a request body or a file sent or fetched (``--max-upload-mb``).
    - ``session_ttl_s`` / ``session_idle_ttl_s``: defaults, ``max_session_ttl_s`` the most.
    - ``session_kept_bytes`` / ``kept_bytes``: what a session's finished
      executions (results and events, kept for replay) may hold, and what
      all of one server process's may (``--session-kept-mb``, ``--kept-mb``;
      past them the oldest are dropped: see ``_kept``).
    - ``keepalive_s``: the SSE ``: keepalive`` comment's period (``--sse-keepalive``).
    - ``keep_alive_s``: how long an idle HTTP connection is kept (``--keep-alive``;
      at least 5 s, above what clients keep one: see ``_connections``).
    - ``allow_hosts``: ``Host`` names served besides loopback's and ``host``
      (``--allow-host``); ``allow_origins``: browser origins besides the
      server's own that may call it (``--allow-origin``). Others: 403.
    - ``ray_address``: run every executor on this Ray cluster (``--ray``): a
      stateless run on its least loaded node, a session pinned to one node.
    """

    host: str = field(default="127.0.0.1", metadata=flag("--host", "address to listen on (default: {})"))
    port: int = field(
        default=8000, metadata=flag("--port", "port (default: {}; 0 picks a free one)", type=int)
    )
    backend: str = field(
        default=DEFAULT_BACKEND,
        metadata=flag("--backend", f"where code runs: {', '.join(backend_names())} (default: {{}})"),
    )
    backends: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "--backends",
            "other backends a request may ask for (default: --backend alone)",
            metavar="A,B",
            store=lambda given: tuple(b.strip() for b in given.split(",") if b.strip()),
            shown=",".join,
        ),
    )
    token: str | None = field(
        default=None,
        repr=False,
        metadata=flag(
            "--token",
            "bearer token every API request must carry (default: $EXECBOX_TOKEN, else a random one "
            "made at start and printed once, in the playground's link)",
            env="EXECBOX_TOKEN",
        ),
    )
    no_token: bool = field(
        default=False,
        metadata=flag(
            "--no-token",
            "take no token (loopback only): every user and program on this machine may then run code as you",
            action="store_true",
        ),
    )
    token_generated: bool = field(default=False, init=False)
    max_sessions: int = field(
        default=64,
        metadata=flag("--max-sessions", "open sessions at most (default: {})", type=int, metavar="N"),
    )
    max_concurrency: int = field(
        default=8,
        metadata=flag(
            "--max-concurrency",
            "executions running at once at most; past it, a run waits in line (default: {})",
            type=int,
            metavar="N",
        ),
    )
    workers: int = field(
        default=1,
        metadata=flag(
            "--workers",
            "processes that answer requests, each with its own executors, sharing --max-concurrency, "
            "--max-queue and --max-sessions (a session stays in the one that made it); auto: one per "
            "core this process may use (default: {})",
            metavar="N|auto",
            store=workers,
            shown=str,
        ),
    )
    max_queued: int | None = field(  # None: 8x max_concurrency
        default=None,
        metadata=flag(
            "--max-queue",
            "runs waiting for a slot at most; past it, 429 with Retry-After (default: 8x --max-concurrency)",
            type=int,
            metavar="N",
        ),
    )
    max_queue_wait_s: float = field(
        default=30.0,
        metadata=flag(
            "--max-queue-wait",
            "the longest a run waits in line before its 429 (default: {})",
            type=float,
            metavar="S",
        ),
    )
    default_limits: Limits = field(
        default_factory=Limits,
        metadata=flag(
            "--timeout",
            "seconds per block when a request sets none (default: {})",
            type=float,
            metavar="S",
            store=lambda given: Limits(timeout_s=given),
            shown=lambda limits: limits.timeout_s,
        ),
    )
    max_timeout_s: float = field(
        default=600.0,
        metadata=flag(
            "--max-timeout", "the most a request may ask per block (default: {})", type=float, metavar="S"
        ),
    )
    max_memory_mb: int = field(default_factory=default_memory_mb)
    max_output_bytes: int = 16 * MiB
    allow_network: bool = field(
        default=False,
        metadata=flag("--allow-network", "let requests ask for limits.network true", action="store_true"),
    )
    allow_gpus: Any = field(
        default=None,
        metadata=flag(
            "--allow-gpus",
            "NVIDIA GPUs requests may ask for with gpus (sandbox, docker); default: none",
            metavar="all|0,1",
        ),
    )
    max_upload_bytes: int = field(
        default=64 * MiB,
        metadata=flag(
            "--max-upload-mb", "largest body, file upload or download (default: {})", **in_mib, metavar="MB"
        ),
    )
    session_ttl_s: float = field(
        default=3600.0,
        metadata=flag(
            "--session-ttl",
            "a session's lifetime when it asks none (default: {})",
            type=float,
            metavar="S",
        ),
    )
    session_idle_ttl_s: float = field(
        default=600.0,
        metadata=flag(
            "--idle-ttl",
            "a session idle this long ends, when it asks none (default: {})",
            type=float,
            metavar="S",
        ),
    )
    max_session_ttl_s: float = field(
        default=86400.0,
        metadata=flag(
            "--max-session-ttl", "the most ttl_s a session may ask (default: {})", type=float, metavar="S"
        ),
    )
    session_kept_bytes: int = field(
        default=SESSION_KEPT_BYTES,
        metadata=flag(
            "--session-kept-mb",
            "what a session's finished executions (results and events, kept for replay) may hold; "
            "past it its oldest are dropped, its latest kept (default: {})",
            **in_mib,
            metavar="MB",
        ),
    )
    kept_bytes: int = field(
        default=KEPT_BYTES,
        metadata=flag(
            "--kept-mb",
            "what the finished executions of all sessions may hold, per server process (each of "
            "--workers); past it the oldest are dropped (default: {})",
            **in_mib,
            metavar="MB",
        ),
    )
    ray_address: str | None = field(
        default=None,
        metadata=flag(
            "--ray",
            "run every executor on this Ray cluster (auto, HOST:PORT or ray://...): stateless runs "
            "on its least loaded node, a session pinned to one node (the ray extra: "
            + install_hint("ray")
            + ")",
            metavar="ADDRESS",
        ),
    )
    keepalive_s: float = field(
        default=15.0,
        metadata=flag(
            "--sse-keepalive",
            "period of the ': keepalive' comment in event streams (default: {})",
            type=float,
            metavar="S",
        ),
    )
    keep_alive_s: float = field(
        default=75.0,
        metadata=flag(
            "--keep-alive",
            "seconds an idle HTTP connection is kept open (default: {}; at least 5, above the idle "
            "time clients keep a pooled connection, so that they close it first)",
            type=float,
            metavar="S",
        ),
    )
    reap_interval_s: float = 0.5
    allow_hosts: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "--allow-host",
            "a Host name (NAME or NAME:PORT) to serve besides 127.0.0.1, localhost, [::1] and --host; "
            "others are refused (DNS rebinding); repeatable",
            action="append",
            metavar="NAME",
            store=tuple,
            shown=list,
        ),
    )
    allow_origins: tuple[str, ...] = field(
        default=(),
        metadata=flag(
            "--allow-origin",
            "a browser origin (such as https://app.example) that may call the API besides the "
            "server's own page; others are refused (cross-site requests); repeatable",
            action="append",
            metavar="ORIGIN",
            store=tuple,
            shown=list,
        ),
    )

    def make_executor(self, backend: str, **options: Any) -> Any:
        """An executor of ``backend`` for a request: here, or with
        ``ray_address`` (``--ray``) on that Ray cluster's nodes (a session
        pinned to one node for its life)."""
        from ..backends import create_executor

        if self.ray_address is None:
            return create_executor(backend, **options)
        return create_executor("ray", address=self.ray_address, backend=backend, **options)

    def __post_init__(self) -> None:
        settle(self)  # defaults that depend on others filled in, the rest checked (_config_checks)

    def limits(self, asked: Any) -> Limits:
        """The limits of a request: its ``limits`` object over the defaults,
        refused above the maxima."""
        if asked is None:
            return self._held(self.default_limits)
        if not isinstance(asked, dict):
            raise ConfigurationError('limits must be an object such as {"timeout_s": 5}')
        fields = set(Limits.__dataclass_fields__)
        unknown = sorted(set(asked) - fields)
        if unknown:
            raise ConfigurationError(f"unknown limits {', '.join(unknown)}: use {', '.join(sorted(fields))}")
        flags = sorted(name for name, value in asked.items() if isinstance(value, bool) and name != "network")
        if flags:
            raise ConfigurationError(f"limits.{flags[0]} must be a number, not {json.dumps(asked[flags[0]])}")
        limits = self.default_limits.replace(**asked)
        over = [
            (name, value, most, flag)
            for name, value, most, flag in (
                ("timeout_s", limits.timeout_s, self.max_timeout_s, "--max-timeout"),
                (
                    "compile_timeout_s",
                    asked.get("compile_timeout_s", 0),  # unasked: the default, held to the maximum below
                    self.max_timeout_s,
                    "--max-timeout",
                ),
                ("memory_mb", limits.memory_mb or 0, self.max_memory_mb, "ServerConfig.max_memory_mb"),
                (
                    "max_output_bytes",
                    limits.max_output_bytes,
                    self.max_output_bytes,
                    "ServerConfig.max_output_bytes",
                ),
            )
            if value > most
        ]
        for name, value, most, setting in over:
            raise ConfigurationError(
                f"limits.{name} {value} is over this server's maximum {most} ({setting})"
            )
        if limits.network and not self.allow_network:
            raise ConfigurationError("limits.network true is not allowed by this server (--allow-network)")
        return self._held(limits)

    def _held(self, limits: Limits) -> Limits:
        """The default compile timeout held to ``max_timeout_s``."""
        if limits.compile_timeout_s > self.max_timeout_s:
            return limits.replace(compile_timeout_s=self.max_timeout_s)
        return limits

    def gpus(self, asked: Any, backend: str) -> tuple[str, ...] | None:
        """The GPUs a request asks (``gpus``), refused past ``allow_gpus``."""
        wanted = parse_gpus(asked)
        if wanted is None:
            return None
        if self.allow_gpus is None:
            raise ConfigurationError("gpus is not allowed by this server (execbox serve --allow-gpus)")
        check_gpu_backend(backend)
        if self.allow_gpus != ("all",):
            past = [g for g in wanted if g not in self.allow_gpus]
            if past:
                raise ConfigurationError(
                    f"gpus {','.join(past)} is past what this server allows: "
                    f"{','.join(self.allow_gpus)} (--allow-gpus)"
                )
        return wanted

    def limits_info(self) -> dict[str, Any]:
        default = self.default_limits
        return {
            "default": {name: getattr(default, name) for name in Limits.__dataclass_fields__},
            "maximum": {
                "timeout_s": self.max_timeout_s,
                "memory_mb": self.max_memory_mb,
                "max_output_bytes": self.max_output_bytes,
                "network": self.allow_network,
                "gpus": list(self.allow_gpus or ()),
            },
        }
