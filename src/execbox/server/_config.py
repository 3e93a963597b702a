"""What one server allows: its backends, limits, sizes and session times
(``ServerConfig``), checked once where it is made."""

from __future__ import annotations

import ipaddress
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigurationError
from .._gpus import check_gpu_backend, parse_gpus
from .._models import Limits, MiB, default_memory_mb
from ..backends import DEFAULT_BACKEND, backend_names

__all__ = ["KEPT_BYTES", "MIN_KEEP_ALIVE_S", "SESSION_KEPT_BYTES", "ServerConfig", "is_loopback"]

# execbox's client keeps an idle connection 4 s at most, httpx's default 5 s (see _connections)
MIN_KEEP_ALIVE_S = 5.0
# worker processes at most (a session's id names its worker in two hex digits)
MAX_WORKERS = 64
# what finished executions kept for replay may hold, per session and per server process (see _kept):
# within the 64 MiB beside the floods that run (four under a 1 MiB cap: about 30 MiB at their peak)
SESSION_KEPT_BYTES = 8 * MiB
KEPT_BYTES = 16 * MiB


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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

    host: str = "127.0.0.1"
    port: int = 8000
    backend: str = DEFAULT_BACKEND
    backends: tuple[str, ...] = ()
    token: str | None = field(default=None, repr=False)
    no_token: bool = False
    token_generated: bool = field(default=False, init=False)
    max_sessions: int = 64
    max_concurrency: int = 8
    max_queued: int | None = None  # None: 8x max_concurrency
    max_queue_wait_s: float = 30.0
    default_limits: Limits = field(default_factory=Limits)
    max_timeout_s: float = 600.0
    max_memory_mb: int = field(default_factory=default_memory_mb)
    max_output_bytes: int = 16 * MiB
    allow_network: bool = False
    allow_gpus: Any = None
    max_upload_bytes: int = 64 * MiB
    session_ttl_s: float = 3600.0
    session_idle_ttl_s: float = 600.0
    max_session_ttl_s: float = 86400.0
    session_kept_bytes: int = SESSION_KEPT_BYTES
    kept_bytes: int = KEPT_BYTES
    keepalive_s: float = 15.0
    keep_alive_s: float = 75.0
    reap_interval_s: float = 0.5
    ray_address: str | None = None
    allow_hosts: tuple[str, ...] = ()
    allow_origins: tuple[str, ...] = ()
    workers: int = 1

    def make_executor(self, backend: str, **options: Any) -> Any:
        """An executor of ``backend`` for a request: here, or with
        ``ray_address`` (``--ray``) on that Ray cluster's nodes (a session
        pinned to one node for its life)."""
        from ..backends import create_executor

        if self.ray_address is None:
            return create_executor(backend, **options)
        return create_executor("ray", address=self.ray_address, backend=backend, **options)

    def __post_init__(self) -> None:
        if not self.backends:
            object.__setattr__(self, "backends", (self.backend,))
        if self.backend not in self.backends:
            object.__setattr__(self, "backends", (self.backend, *self.backends))
        known = backend_names()
        for name in self.backends:
            if name not in known:
                raise ConfigurationError(
                    f"unknown backend {name!r} (--backend/--backends): use one of {', '.join(known)}"
                )
        self._settle_token()
        object.__setattr__(self, "allow_gpus", parse_gpus(self.allow_gpus, "--allow-gpus"))
        if not 0 <= self.port < 65536:
            raise ConfigurationError(f"--port {self.port} is not a port number (0-65535)")
        if self.max_queued is None:
            object.__setattr__(self, "max_queued", 8 * self.max_concurrency)
        if not isinstance(self.max_queued, int) or self.max_queued < 0:
            raise ConfigurationError(
                "ServerConfig.max_queued (--max-queue) must be a whole number, 0 or more, "
                f"got {self.max_queued!r}"
            )
        if not isinstance(self.workers, int) or not 1 <= self.workers <= MAX_WORKERS:
            raise ConfigurationError(
                f"ServerConfig.workers (--workers) must be a whole number from 1 to {MAX_WORKERS}, "
                f"got {self.workers!r}"
            )
        for name in (
            "max_sessions",
            "max_concurrency",
            "max_upload_bytes",
            "session_kept_bytes",
            "kept_bytes",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigurationError(
                    f"ServerConfig.{name} must be a positive whole number, got {value!r}"
                )
        for name in (
            "session_ttl_s",
            "session_idle_ttl_s",
            "max_session_ttl_s",
            "keepalive_s",
            "max_timeout_s",
            "max_queue_wait_s",
        ):
            if not getattr(self, name) > 0:
                raise ConfigurationError(f"ServerConfig.{name} must be a positive number of seconds")
        if not self.keep_alive_s >= MIN_KEEP_ALIVE_S:
            raise ConfigurationError(
                f"--keep-alive {self.keep_alive_s} is under {MIN_KEEP_ALIVE_S:g} s: a server that closes "
                "idle connections sooner than its clients drop them (httpx: 5 s) races their next "
                "request, which is then lost unanswered"
            )

    def _settle_token(self) -> None:
        if self.no_token:
            if self.token:
                raise ConfigurationError("--no-token and --token (or EXECBOX_TOKEN) together: choose one")
            if not is_loopback(self.host):
                raise ConfigurationError(
                    f"refusing to listen on {self.host} without a token (--no-token): whoever reaches it "
                    "could run code here. Drop --no-token (a token is made and printed), or listen on "
                    "127.0.0.1"
                )
            return
        if self.token is None:
            object.__setattr__(self, "token", secrets.token_urlsafe(32))
            object.__setattr__(self, "token_generated", True)
        elif (
            not isinstance(self.token, str)
            or not self.token.strip()
            or not self.token.isascii()
            or any(c.isspace() or not c.isprintable() for c in self.token)
        ):
            raise ConfigurationError(
                "--token (EXECBOX_TOKEN) must be non-empty printable ASCII without spaces "
                "(it is sent as Authorization: Bearer <token>); for none at all, say "
                "--no-token"
            )

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
        for name, value, most, flag in over:
            raise ConfigurationError(f"limits.{name} {value} is over this server's maximum {most} ({flag})")
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
