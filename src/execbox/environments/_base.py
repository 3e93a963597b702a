"""What every Python environment offers an executor."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from typing import Any, Self

from .._foreign import ENVIRONMENT_HINTS, refuse_foreign
from .._progress import OnProgress, Progress

__all__ = ["Environment", "OnProgress", "Progress"]


class Environment(ABC):
    """An interpreter plus packages. ``prepare()`` makes it ready (once) and
    returns the absolute path of its interpreter.

    A context manager too, as AG2's ``create_virtual_env`` is used: entering
    makes it ready (a venv created, an image built), so a failure shows
    there; leaving removes nothing: a cached venv is shared by every
    executor of the same spec (in other processes too) and a ``path=`` or an
    interpreter is the user's.
    """

    def __new__(cls, *args: Any, **options: Any) -> Self:
        refuse_foreign(cls, options, ENVIRONMENT_HINTS)  # AG2's python_version=, venv_path=...: name ours
        return super().__new__(cls)

    def __enter__(self) -> Self:
        self.prepare()
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    @abstractmethod
    def prepare(self, on_progress: OnProgress = None) -> str:
        """Make the environment ready; return its interpreter's absolute path.
        ``on_progress`` (``execbox._progress``) gets the steps of the work
        (default: a spinner on a terminal, log lines otherwise)."""

    def variables(self, python: str) -> dict[str, str]:
        """Environment variables a child needs to use this environment."""
        return {}

    def bin_dir(self, python: str) -> str:
        """The directory put first on the child's PATH, so that ``python`` and
        ``pip`` in a shell block mean this environment's."""
        return os.path.dirname(python)
