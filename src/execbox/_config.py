"""Executors saved as JSON and loaded back (declarative configuration).

An executor remembers the keyword options it was made with
(``Executor.__new__`` keeps them); ``executor_to_config`` turns them into
plain JSON, ``executor_from_config`` makes a new executor from it::

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
from typing import TYPE_CHECKING, Any

from ._errors import ConfigurationError
from ._models import Limits
from ._workspace import Workspace
from .environments import DockerPython, SystemPython, Venv

if TYPE_CHECKING:
    from .backends._base import Executor

__all__ = ["executor_from_config", "executor_to_config"]

VERSION = 1


def executor_to_config(executor: Executor) -> dict[str, Any]:
    """The executor's backend and options as JSON-ready data."""
    options = getattr(executor, "_init_options", {})
    saved: dict[str, Any] = {}
    for key, value in options.items():
        if key == "workspace" and value is None:
            continue
        saved[key] = _encode(value, key)
    return {"version": VERSION, "backend": executor.name, "options": saved}


def executor_from_config(config: Mapping[str, Any]) -> Executor:
    """A new executor made from what ``executor_to_config`` returned."""
    from .backends import create_executor

    if not isinstance(config, Mapping) or "backend" not in config:
        raise ConfigurationError(
            "an executor config is a mapping with 'backend' and 'options' (what executor.to_config() returns)"
        )
    options = config.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigurationError("the executor config's 'options' must be a mapping of option names to values")
    return create_executor(str(config["backend"]), **{k: _decode(k, v) for k, v in options.items()})


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
    if dataclasses.is_dataclass(value) and type(value).__name__ == "JupyterConnectionInfo":
        return {"type": "jupyter-connection", **dataclasses.asdict(value)}
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
        return {"type": "venv", "path": str(env._path) if env._path is not None else None,
                "python": env.python, "packages": list(env.packages),
                "requirements": str(env.requirements) if env.requirements else None,
                "installer": env.installer}
    return {"type": "docker-python", "image": env.image, "pip_packages": list(env.pip_packages),
            "requirements_file": env.requirements_file, "dockerfile": env.dockerfile,
            "volumes": _encode(env.volumes, "environment.volumes"),
            "cleanup_container": env.cleanup_container,
            "keep_container_running": env.keep_container_running}


_TYPES: dict[str, Any] = {
    "limits": Limits,
    "system-python": SystemPython,
    "venv": Venv,
    "docker-python": DockerPython,
}


def _decode(option: str, value: Any) -> Any:
    if not (isinstance(value, Mapping) and "type" in value):
        return value
    fields = {k: v for k, v in value.items() if k != "type"}
    kind = value["type"]
    if kind == "jupyter-connection":
        from .backends._gateway import JupyterConnectionInfo

        return JupyterConnectionInfo(**fields)
    maker = _TYPES.get(kind)
    if maker is None:
        raise ConfigurationError(
            f"option {option} has an unknown type {kind!r}: use one of {', '.join(sorted(_TYPES))}, "
            "jupyter-connection"
        )
    try:
        return maker(**fields)
    except TypeError as exc:
        raise ConfigurationError(f"option {option} ({kind}) has a field that does not fit: {exc}") from None
