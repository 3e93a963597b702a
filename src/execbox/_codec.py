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
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import ConfigurationError
from ._models import Limits
from ._workspace import Workspace
from .environments import DockerPython, SystemPython, Venv

__all__ = ["VERSION", "decode_option", "encode_options", "register_option_type"]

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


def _encode(value: Any, option: str) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Limits):
        return {"type": "limits", **dataclasses.asdict(value)}
    if isinstance(value, Workspace):
        return str(value.path)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (SystemPython, Venv, DockerPython)):
        return _encode_environment(value)
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


def _encode_environment(env: SystemPython | Venv | DockerPython) -> dict[str, Any]:
    if isinstance(env, SystemPython):
        return {"type": "system-python", "executable": env.executable}
    if isinstance(env, Venv):
        return {
            "type": "venv",
            "path": str(env._path) if env._path is not None else None,
            "python": env.python,
            "packages": list(env.packages),
            "requirements": str(env.requirements) if env.requirements else None,
            "installer": env.installer,
        }
    return {
        "type": "docker-python",
        "image": env.image,
        "pip_packages": list(env.pip_packages),
        "requirements_file": env.requirements_file,
        "dockerfile": env.dockerfile,
        "volumes": _encode(env.volumes, "environment.volumes"),
        "cleanup_container": env.cleanup_container,
        "keep_container_running": env.keep_container_running,
    }


_TYPES: dict[str, Any] = {
    "limits": Limits,
    "system-python": SystemPython,
    "venv": Venv,
    "docker-python": DockerPython,
}


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
