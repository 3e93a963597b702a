"""Backends, found through the ``execbox.backends`` entry-point group (the
built-ins register there too), the default choice, and executors made
again from their saved config."""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

from .._codec import decode_option
from .._errors import ConfigurationError
from ._base import Executor, UnenforcedLimitWarning
from ._executor_api import Capabilities

__all__ = [
    "DEFAULT_BACKEND",
    "Capabilities",
    "Executor",
    "UnenforcedLimitWarning",
    "backend_names",
    "create_executor",
    "default_executor",
    "executor_from_config",
    "executor_to_config",
    "get_backend",
]

GROUP = "execbox.backends"
DEFAULT_BACKEND = "sandbox"
# Used when execbox runs from a source tree without installed metadata.
_BUILTIN = {
    "local": "execbox.backends.local:LocalExecutor",
    "sandbox": "execbox.backends.sandbox:SandboxExecutor",
    "jupyter": "execbox.backends.jupyter:JupyterExecutor",
    "docker": "execbox.backends.docker:DockerExecutor",
    "remote": "execbox.backends.remote:RemoteExecutor",
    "ray": "execbox.backends.ray:RayExecutor",
}


def _registered() -> dict[str, str]:
    found = dict(_BUILTIN)
    for entry in entry_points(group=GROUP):
        found[entry.name] = entry.value
    return found


def backend_names() -> list[str]:
    return sorted(_registered())


def get_backend(name: str) -> type[Executor]:
    """The executor class registered as ``name``."""
    target = _registered().get(name)
    if target is None:
        raise ConfigurationError(f"unknown backend {name!r}: use one of {', '.join(backend_names())}")
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def create_executor(backend: str | None = None, /, **options: Any) -> Executor:
    """An executor of the named backend (default: ``DEFAULT_BACKEND``);
    ``options`` go to its class (a ``backend=`` among them is the option of
    a backend that runs another: remote, ray)."""
    return get_backend(backend or DEFAULT_BACKEND)(**options)


def default_executor(**options: Any) -> Executor:
    """An executor of the default backend."""
    return create_executor(None, **options)


def executor_to_config(executor: Executor) -> dict[str, Any]:
    """The executor's backend and options as JSON-ready data."""
    return executor.to_config()


def executor_from_config(config: Mapping[str, Any]) -> Executor:
    """A new executor made from what ``Executor.to_config()`` returned."""
    if not isinstance(config, Mapping) or "backend" not in config:
        raise ConfigurationError(
            "an executor config is a mapping with 'backend' and 'options' (what executor.to_config() returns)"
        )
    options = config.get("options") or {}
    if not isinstance(options, Mapping):
        raise ConfigurationError(
            "the executor config's 'options' must be a mapping of option names to values"
        )
    backend = get_backend(str(config["backend"]))  # first: its module registers its option types
    return backend(**{k: decode_option(k, v) for k, v in options.items()})
