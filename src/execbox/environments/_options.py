"""The environments as executor options in a saved config (``_codec``):
each registers its name and the fields it is made again from, so that
``executor_from_config`` can rebuild ``environment=SystemPython(...)``,
``Venv(...)`` and ``DockerPython(...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._codec import register_option_codec
from ._docker import DockerPython
from ._system import SystemPython
from ._venv import Venv

__all__ = ["register_environment_options"]


def _system_python(env: SystemPython, encode: Callable[[Any, str], Any]) -> dict[str, Any]:
    return {"executable": env.executable}


def _venv(env: Venv, encode: Callable[[Any, str], Any]) -> dict[str, Any]:
    return {
        "path": str(env._path) if env._path is not None else None,
        "python": env.python,
        "packages": list(env.packages),
        "requirements": str(env.requirements) if env.requirements else None,
        "installer": env.installer,
    }


def _docker_python(env: DockerPython, encode: Callable[[Any, str], Any]) -> dict[str, Any]:
    return {
        "image": env.image,
        "pip_packages": list(env.pip_packages),
        "requirements_file": env.requirements_file,
        "dockerfile": env.dockerfile,
        "volumes": encode(env.volumes, "environment.volumes"),
        "cleanup_container": env.cleanup_container,
        "keep_container_running": env.keep_container_running,
    }


def register_environment_options() -> None:
    register_option_codec("system-python", SystemPython, _system_python)
    register_option_codec("venv", Venv, _venv)
    register_option_codec("docker-python", DockerPython, _docker_python)
