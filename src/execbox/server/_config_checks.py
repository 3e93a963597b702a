"""What a ``ServerConfig`` must hold, checked once where it is made (its
``__post_init__``): the defaults that depend on other fields filled in, and
every refusal naming the flag to change."""

from __future__ import annotations

import ipaddress
import secrets
from typing import Any

from .._errors import ConfigurationError
from .._gpus import parse_gpus
from ..backends import backend_names
from ._flags import MAX_WORKERS

__all__ = ["MIN_KEEP_ALIVE_S", "is_loopback", "settle"]

# execbox's client keeps an idle connection 4 s at most, httpx's default 5 s (see _connections)
MIN_KEEP_ALIVE_S = 5.0


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def settle(config: Any) -> None:
    """Fill in what depends on other fields (``backends``, ``token``, ``max_queued``), check the rest."""
    if not config.backends:
        object.__setattr__(config, "backends", (config.backend,))
    if config.backend not in config.backends:
        object.__setattr__(config, "backends", (config.backend, *config.backends))
    known = backend_names()
    for name in config.backends:
        if name not in known:
            raise ConfigurationError(
                f"unknown backend {name!r} (--backend/--backends): use one of {', '.join(known)}"
            )
    _settle_token(config)
    object.__setattr__(config, "allow_gpus", parse_gpus(config.allow_gpus, "--allow-gpus"))
    if not 0 <= config.port < 65536:
        raise ConfigurationError(f"--port {config.port} is not a port number (0-65535)")
    if config.max_queued is None:
        object.__setattr__(config, "max_queued", 8 * config.max_concurrency)
    if not isinstance(config.max_queued, int) or config.max_queued < 0:
        raise ConfigurationError(
            "ServerConfig.max_queued (--max-queue) must be a whole number, 0 or more, "
            f"got {config.max_queued!r}"
        )
    if not isinstance(config.workers, int) or not 1 <= config.workers <= MAX_WORKERS:
        raise ConfigurationError(
            f"ServerConfig.workers (--workers) must be a whole number from 1 to {MAX_WORKERS}, "
            f"got {config.workers!r}"
        )
    for name in (
        "max_sessions",
        "max_concurrency",
        "max_upload_bytes",
        "session_kept_bytes",
        "kept_bytes",
    ):
        value = getattr(config, name)
        if not isinstance(value, int) or value < 1:
            raise ConfigurationError(f"ServerConfig.{name} must be a positive whole number, got {value!r}")
    for name in (
        "session_ttl_s",
        "session_idle_ttl_s",
        "max_session_ttl_s",
        "keepalive_s",
        "max_timeout_s",
        "max_queue_wait_s",
    ):
        if not getattr(config, name) > 0:
            raise ConfigurationError(f"ServerConfig.{name} must be a positive number of seconds")
    if not config.keep_alive_s >= MIN_KEEP_ALIVE_S:
        raise ConfigurationError(
            f"--keep-alive {config.keep_alive_s} is under {MIN_KEEP_ALIVE_S:g} s: a server that closes "
            "idle connections sooner than its clients drop them (httpx: 5 s) races their next "
            "request, which is then lost unanswered"
        )


def _settle_token(config: Any) -> None:
    if config.no_token:
        if config.token:
            raise ConfigurationError("--no-token and --token (or EXECBOX_TOKEN) together: choose one")
        if not is_loopback(config.host):
            raise ConfigurationError(
                f"refusing to listen on {config.host} without a token (--no-token): whoever reaches it "
                "could run code here. Drop --no-token (a token is made and printed), or listen on "
                "127.0.0.1"
            )
        return
    if config.token is None:
        object.__setattr__(config, "token", secrets.token_urlsafe(32))
        object.__setattr__(config, "token_generated", True)
    elif (
        not isinstance(config.token, str)
        or not config.token.strip()
        or not config.token.isascii()
        or any(c.isspace() or not c.isprintable() for c in config.token)
    ):
        raise ConfigurationError(
            "--token (EXECBOX_TOKEN) must be non-empty printable ASCII without spaces "
            "(it is sent as Authorization: Bearer <token>); for none at all, say "
            "--no-token"
        )
