"""The system (or current) Python interpreter, by absolute path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from .._errors import EnvironmentSetupError
from ._base import Environment, OnProgress
from ._interpreters import find_version, is_version

__all__ = ["SystemPython", "real_interpreter"]

_resolved: dict[str, str] = {}
# a name that says its version: python3.12 (what a version is looked for as, when it does not run)
_VERSIONED = re.compile(r"^python(\d+(?:\.\d+){0,2})$")
# the most of what a failing interpreter said that its error quotes
_SAID_CHARS = 1000


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

    def prepare(self, on_progress: OnProgress = None) -> str:
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
            done = subprocess.run(
                [path, "-c", "import sys; print(sys.executable)"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise EnvironmentSetupError(f"{path!r} does not run as a Python interpreter: {exc}") from None
        if done.returncode != 0:
            path = _instead(executable, path, done)
        elif done.stdout.strip():
            path = done.stdout.strip()
    _resolved[executable] = path
    return path


def _instead(executable: str, path: str, done: subprocess.CompletedProcess[str]) -> str:
    """The interpreter a ``python3.12`` that does not run (a pyenv shim of a
    version not selected here) stands for, found as ``Venv(python="3.12")``
    finds it; else the error, with what the program said."""
    said = (done.stderr or done.stdout).strip()
    if len(said) > _SAID_CHARS:
        said = said[:_SAID_CHARS] + " [...]"
    failed = f"{path!r} does not run as a Python interpreter (exit status {done.returncode})"
    failed += f", saying:\n{said}\n" if said else ". "
    named = _VERSIONED.match(os.path.basename(executable))
    if named is None:
        raise EnvironmentSetupError(
            failed + "Give one that runs: an absolute path, or a version, SystemPython('3.12'), "
            "which is looked for on PATH, uv's and pyenv's interpreters"
        )
    version = named.group(1)
    try:
        return find_version(version)
    except EnvironmentSetupError as exc:
        raise EnvironmentSetupError(
            f"{failed}Nor was Python {version} found where SystemPython({version!r}) and "
            f"Venv(python={version!r}) look: {exc}"
        ) from None


def _is_binary(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(4) == b"\x7fELF"
    except OSError:
        return False
