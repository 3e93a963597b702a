"""Executor options as JSON and back: the data of a saved executor.

An executor remembers the keyword options it was made with
(``Executor.__new__`` keeps them); ``encode_options`` turns them into plain
JSON and ``decode_option`` reads one back, so that ``Executor.to_config()``
and ``execbox.executor_from_config`` can save and remake an executor::

    {"backend": "sandbox", "options": {"limits": {"timeout_s": 30, ...},
                                       "environment": {"type": "venv", "packages": ["numpy"]}}}

Values that are not data (callbacks, live server objects, SDK objects) cannot
be saved: the error names the option and what to give instead. A temporary
workspace is not saved (the loaded executor gets a fresh one); a given one is
saved as its path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ._errors import ConfigurationError
from ._models import Limits
from ._workspace import Workspace

__all__ = ["VERSION", "decode_option", "encode_options", "register_option_codec", "register_option_type"]

# (value, encode) -> the value's fields as JSON-ready data; ``encode(value, option)`` encodes a nested one
Fields = Callable[[Any, Callable[[Any, str], Any]], dict[str, Any]]

VERSION = 1


def encode_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """An executor's keyword options as JSON-ready data (a temporary
    workspace, given as None, is left out)."""
    return {
        key: _encode(value, key)
        for key, value in options.items()
        if not (key == "workspace" and value is None)
    }


def register_option_type(name: str, maker: type) -> None:
    """Let options of a backend's own dataclass be saved as
    ``{"type": name, ...fields}`` and made again from it."""
    _TYPES[name] = maker
    _NAMES[maker] = name


def register_option_codec(name: str, maker: type, fields: Fields) -> None:
    """Let options of type ``maker`` (not a dataclass, or saved in a shape of
    their own) be saved as ``{"type": name, **fields(value, encode)}`` and made
    again by ``maker(**those fields)``: how a layer above (environments)
    teaches this module its types without this module importing it."""
    _TYPES[name] = maker
    _ENCODERS[maker] = (name, fields)


def _encode(value: Any, option: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Limits):
        return {"type": "limits", **dataclasses.asdict(value)}
    if isinstance(value, Workspace):
        return str(value.path)
    if isinstance(value, Path):
        return str(value)
    for maker, (name, fields) in _ENCODERS.items():
        if isinstance(value, maker):
            return {"type": name, **fields(value, _encode)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and type(value) in _NAMES:
        return {"type": _NAMES[type(value)], **dataclasses.asdict(value)}
    if isinstance(value, Mapping):
        return {str(k): _encode(v, f"{option}[{k!r}]") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v, option) for v in value]
    raise ConfigurationError(
        f"option {option}={value!r} cannot be saved in a config ({type(value).__name__} is not data): "
        "give it by name or value (a backend name, a kernel='local'/'sandbox' string, a path, an import "
        "path for a function), or set it again after loading"
    )


_TYPES: dict[str, Any] = {"limits": Limits}
# a type whose fields are not its dataclass fields -> its name and what gives them (register_option_codec)
_ENCODERS: dict[type, tuple[str, Fields]] = {}


_NAMES: dict[type, str] = {}  # a backend's own option types, by register_option_type


def decode_option(option: str, value: Any) -> Any:
    """One saved option as the object it was (a plain value stays as it is)."""
    if not (isinstance(value, Mapping) and "type" in value):
        return value
    fields = {k: v for k, v in value.items() if k != "type"}
    kind = value["type"]
    maker = _TYPES.get(kind)
    if maker is None:
        raise ConfigurationError(
            f"option {option} has an unknown type {kind!r}: use one of {', '.join(sorted(_TYPES))}"
        )
    try:
        return maker(**fields)
    except TypeError as exc:
        raise ConfigurationError(f"option {option} ({kind}) has a field that does not fit: {exc}") from None
