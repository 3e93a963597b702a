"""The system (or current) Python interpreter, by absolute path."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from .._errors import EnvironmentSetupError
from ._base import Environment, Progress
from ._interpreters import find_version, is_version

__all__ = ["SystemPython", "real_interpreter"]

_resolved: dict[str, str] = {}


class SystemPython(Environment):
    """An existing interpreter. ``executable=None`` is the one running execbox.

    A version (``"3.12"``) is found on this machine (``_interpreters``). A
    name (``python3.12``) is looked up once on PATH; a launcher script such
    as a pyenv shim is asked for the real interpreter behind it, so that no
    block pays the shim's start-up (~45 ms).
    """

    def __init__(self, executable: str | None = None) -> None:
        self.executable = executable

    def __repr__(self) -> str:
        return f"SystemPython({self.executable!r})"

    def prepare(self, progress: Progress | None = None) -> str:
        return real_interpreter(self.executable or sys.executable)


def real_interpreter(executable: str) -> str:
    """The absolute path of the interpreter ``executable`` stands for."""
    if executable in _resolved:
        return _resolved[executable]
    if is_version(executable):
        _resolved[executable] = find_version(executable)
        return _resolved[executable]
    path = executable if os.sep in executable else shutil.which(executable)
    if not path or not os.path.isfile(path):
        raise EnvironmentSetupError(
            f"Python interpreter {executable!r} not found: give an absolute path "
            "or a name on PATH (SystemPython(executable=...))"
        )
    path = os.path.abspath(path)
    if not _is_binary(path):  # a shim or wrapper script: ask it who it is
        try:
            out = subprocess.run(
                [path, "-c", "import sys; print(sys.executable)"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError) as exc:
            raise EnvironmentSetupError(f"{path!r} does not run as a Python interpreter: {exc}") from None
        if out:
            path = out
    _resolved[executable] = path
    return path


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False
