"""A virtual environment, created on demand with its packages, cached by spec."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .._cache import cache_dir
from .._errors import ConfigurationError, EnvironmentSetupError
from .._progress import reporting
from ._base import Environment, OnProgress, Progress
from ._interpreters import find_uv
from ._system import SystemPython, real_interpreter

__all__ = ["Venv", "cache_dir"]

READY_MARKER = ".execbox-ready"
SETUP_TIMEOUT_S = 1800


class Venv(Environment):
    """A venv with ``packages`` and/or a ``requirements`` file, of the
    interpreter ``python``: a path, a name on PATH, or a version ("3.11",
    found on this machine, never downloaded; AG2's ``python_version``).

    ``path=None`` keeps it in execbox's cache under a name derived from the
    spec (interpreter, packages, requirements content), so the same spec is
    built once and shared. Uses ``uv`` when present (``installer="auto"``),
    else ``venv`` + pip.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        python: str | None = None,
        packages: Sequence[str] = (),
        requirements: str | os.PathLike[str] | None = None,
        installer: str = "auto",
    ) -> None:
        if isinstance(packages, str):
            raise ConfigurationError("Venv(packages=...) takes a list of requirement strings, not one string")
        if installer not in ("auto", "uv", "pip"):
            raise ConfigurationError(f"Venv(installer={installer!r}): use 'auto', 'uv' or 'pip'")
        self._path = Path(path).expanduser().resolve() if path is not None else None
        self.python = python
        self.packages = tuple(packages)
        self.requirements = Path(requirements).resolve() if requirements is not None else None
        if self.requirements is not None and not self.requirements.is_file():
            raise ConfigurationError(f"Venv(requirements={str(requirements)!r}): no such file")
        self.installer = installer

    def __repr__(self) -> str:
        return f"Venv(path={str(self.path)!r}, packages={list(self.packages)!r})"

    @property
    def cached(self) -> bool:
        """Kept in execbox's cache (no ``path=``): execbox may make a
        derived Venv with more packages; a given path is the user's."""
        return self._path is None

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else cache_dir() / "venvs" / self.spec_hash()

    def spec_hash(self) -> str:
        base = SystemPython(self.python).prepare()
        spec = {
            "python": base,
            "packages": sorted(self.packages),
            "requirements": self.requirements.read_text() if self.requirements else None,
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def variables(self, python: str) -> dict[str, str]:
        return {"VIRTUAL_ENV": str(self.path)}

    def prepare(self, on_progress: OnProgress = None) -> str:
        path = self.path
        python = path / "bin" / "python"
        if (path / READY_MARKER).exists():
            return str(python)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(f"{path}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one creator; the others wait and reuse
            if not (path / READY_MARKER).exists():
                with reporting(on_progress) as progress:
                    self._create(path, progress)
        return str(python)

    def _create(self, path: Path, progress: Progress) -> None:
        base = real_interpreter(self.python) if self.python else SystemPython().prepare()
        uv = find_uv() if self.installer in ("auto", "uv") else None
        if self.installer == "uv" and uv is None:
            raise EnvironmentSetupError("Venv(installer='uv') but uv is not installed: pip install uv")
        if path.exists() and self._path is None:
            shutil.rmtree(path)  # a cached venv left half-made by a crash
        if not (path / "bin" / "python").exists():  # a given path may hold a venv already
            progress(f"creating virtual environment at {path}")
            if uv:
                _run([uv, "venv", "--quiet", "--seed", "--python", base, str(path)], "create the venv")
            else:
                _run([base, "-m", "venv", str(path)], "create the venv")
        python = str(path / "bin" / "python")
        args: list[str] = list(self.packages)
        if self.requirements is not None:
            args += ["-r", str(self.requirements)]
        if args:
            progress(f"installing {', '.join(self.packages) or self.requirements}")
            if uv:
                _run([uv, "pip", "install", "--quiet", "--python", python, *args], "install packages")
            else:
                _run(
                    [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args],
                    "install packages",
                )
        (path / READY_MARKER).write_text(json.dumps({"packages": list(self.packages)}))
        progress("environment ready")


def _run(argv: list[str], what: str) -> None:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=SETUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EnvironmentSetupError(f"could not {what}: still running after {SETUP_TIMEOUT_S} s") from None
    except OSError as exc:
        raise EnvironmentSetupError(f"could not {what}: {exc}") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise EnvironmentSetupError(
            f"could not {what} (exit {done.returncode}); check the package names and "
            "versions given to Venv(packages=..., requirements=...):\n" + "\n".join(detail)
        )
