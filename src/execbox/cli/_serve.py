"""``execbox serve``: execbox as an HTTP service (see ``execbox.server``)."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any

from .._errors import ConfigurationError, install_hint

__all__ = ["config_of", "register"]


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "serve",
        help="serve execbox over HTTP (runs, sessions, streamed output, files)",
        description="Serve execbox over HTTP: /v1/run, /v1/batch, sessions with streamed executions "
        "and files; the API is at /openapi.json. Needs the server extra: " + install_hint("server") + ".",
    )
    for field in _flagged():
        _add_flag(cmd, field)
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
    config = config_of(args)
    assert isinstance(config, ServerConfig)
    serve(config, log_level=args.log_level)  # prints where, with the token made for this run
    return 0


def config_of(args: argparse.Namespace) -> Any:
    """The ``ServerConfig`` that the parsed flags say: each field from its flag."""
    from ..server._config import ServerConfig

    return ServerConfig(
        **{field.name: field.metadata["flag"].store(getattr(args, field.name)) for field in _flagged()}
    )


def _flagged() -> list[dataclasses.Field[Any]]:
    """The fields of ``ServerConfig`` that have a flag, in the order ``--help`` lists them."""
    from ..server._config import ServerConfig  # not the server's package: no server extra needed

    return [field for field in dataclasses.fields(ServerConfig) if "flag" in field.metadata]


def _add_flag(cmd: argparse.ArgumentParser, field: dataclasses.Field[Any]) -> None:
    from ..server._flags import flag_default

    option = field.metadata["flag"]
    default = flag_default(field)
    shown = f"{default:g}" if isinstance(default, float) else str(default)
    options: dict[str, Any] = {
        "dest": field.name,
        "default": default,
        "help": option.help.replace("{}", shown),
    }
    if option.action:
        options["action"] = option.action
    elif option.type:
        options["type"] = option.type
    if option.metavar:
        options["metavar"] = option.metavar
    cmd.add_argument(option.name, **options)
