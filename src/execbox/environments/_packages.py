"""Packages an environment must have: which are missing, and a venv with
more of them.

Shared by whatever asks an executor's environment for packages (host
functions declared with AG2's / AutoGen's ``@with_requirements``; the same
logic as ``PythonTool``'s libraries). execbox installs only into a venv it
owns: a ``Venv()`` in its cache, grown into a new cached spec with the
packages added. A system Python and a ``Venv(path=...)`` are the user's:
missing packages there are an error that names them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

from .._errors import ConfigurationError, EnvironmentSetupError
from ._base import Environment
from ._venv import Venv

__all__ = ["PROBE_SOURCE", "missing_packages", "require_packages", "with_packages"]

PROBE_TIMEOUT_S = 120
# The program that finds the missing requirements (see its docstring).
PROBE_SOURCE = Path(__file__).with_name("_probe.py")
# Its call here: the requirements are its first argument, as JSON.
_PROBE_CALL = "\nimport json, sys\n__execbox_probe(json.loads(sys.argv[1]), '')\n"


def with_packages(venv: Venv, packages: Sequence[str]) -> Venv:
    """``venv`` with ``packages`` added: a new cached spec (``venv`` itself
    when it has them all already)."""
    added = [p for p in packages if p not in venv.packages]
    if not added:
        return venv
    return Venv(
        python=venv.python,
        packages=(*venv.packages, *added),
        requirements=venv.requirements,
        installer=venv.installer,
    )


def missing_packages(python: str, packages: Sequence[str]) -> list[str]:
    """The requirements of ``packages`` the interpreter ``python`` does not satisfy."""
    if not packages:
        return []
    try:
        probe = PROBE_SOURCE.read_text(encoding="utf-8") + _PROBE_CALL
        done = subprocess.run(
            [python, "-c", probe, json.dumps(list(packages))],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
        )
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise EnvironmentSetupError(
            f"could not check the packages {', '.join(packages)} with {python}: {exc}"
        ) from None
    return [p for p in packages if p in found]


def require_packages(environment: Environment, python: str, packages: Sequence[str], needed_by: str) -> None:
    """Raise ``ConfigurationError`` naming the packages of ``packages`` that
    ``python`` (the interpreter of ``environment``, which execbox does not
    install into) lacks, and how to get them."""
    missing = missing_packages(python, packages)
    if not missing:
        return
    names = ", ".join(missing)
    where = (
        f"the Venv at {environment.path}, which is yours (execbox installs only into the venvs of its cache)"
        if isinstance(environment, Venv)
        else f"{environment!r}, a Python execbox never installs into"
    )
    raise ConfigurationError(
        f"{needed_by} need{'s' if len(missing) == 1 else ''} {names}, not installed in {where}: use "
        f"environment=Venv() (execbox creates and caches a venv with them), or install them there "
        f"(pip install {' '.join(missing)})"
    )
