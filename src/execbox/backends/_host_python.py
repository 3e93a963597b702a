"""For backends whose blocks run a Python of this machine (the local and
sandbox backends, a Jupyter kernel): ``SystemPython`` or a ``Venv``."""

from __future__ import annotations

from .._errors import ConfigurationError
from ..environments import Environment

__all__ = ["HostPython"]


class HostPython:
    """Mixed in before ``Executor``: its environment is any host Python."""

    _environment: Environment

    @property
    def environment(self) -> Environment:
        """The Python blocks run with (``SystemPython()`` or a ``Venv``)."""
        return self._environment

    def _checked_environment(self, environment: Environment) -> Environment:
        if not isinstance(environment, Environment):
            raise ConfigurationError(
                f"environment must be SystemPython(...) or Venv(...), not {environment!r}"
            )
        return environment
