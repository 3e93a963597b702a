"""A ``ServerConfig`` field's ``execbox serve`` flag, declared on the field
(``field(metadata=flag(...))``): its name, help, parsing and how the parsed
value becomes the field's; ``cli/_serve.py`` builds its parser from them
and the config from the parsed flags, so each option is declared once."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass
from typing import Any

from .._errors import ConfigurationError
from .._models import MiB

__all__ = ["MAX_WORKERS", "Flag", "flag", "flag_default", "in_mib", "workers"]

# worker processes at most (a session's id names its worker in two hex digits)
MAX_WORKERS = 64


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Flag:
    """``name`` (``--port``); ``help`` with ``{}`` where the default goes;
    ``type``/``action``/``metavar`` as argparse takes them; ``store``: the
    parsed value to the field's; ``shown``: the field's default to the
    flag's; ``env``: a variable whose value, when set, is the default."""

    name: str
    help: str
    type: Callable[[str], Any] | None = None
    action: str | None = None
    metavar: str | None = None
    store: Callable[[Any], Any] = _same
    shown: Callable[[Any], Any] = _same
    env: str | None = None


def flag(name: str, help: str, **options: Any) -> dict[str, Flag]:
    """A field's metadata naming its flag (see ``Flag``)."""
    return {"flag": Flag(name, help, **options)}


def flag_default(field: Field[Any]) -> Any:
    """The default of ``field``'s flag: its variable's value, else the field's default as the flag says it."""
    option: Flag = field.metadata["flag"]
    if option.env and os.environ.get(option.env):
        return os.environ[option.env]
    if option.action == "store_true":
        return False
    if field.default_factory is not MISSING:
        return option.shown(field.default_factory())
    return option.shown(field.default)


# a size in bytes given in MiB
in_mib: dict[str, Any] = {"type": int, "store": lambda mb: mb * MiB, "shown": lambda size: size // MiB}


def workers(given: str) -> int:
    """``--workers N|auto``: auto is one per core this process may use."""
    if given == "auto":
        return min(len(os.sched_getaffinity(0)), MAX_WORKERS)
    try:
        return int(given)
    except ValueError:
        raise ConfigurationError(
            f"--workers {given!r}: give a whole number from 1 to {MAX_WORKERS}, or auto"
        ) from None
