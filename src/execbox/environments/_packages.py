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

from .._errors import ConfigurationError, EnvironmentSetupError
from ._base import Environment
from ._venv import Venv

__all__ = ["missing_packages", "require_packages", "with_packages"]

PROBE_TIMEOUT_S = 120
# Which requirements are not satisfied, run by the environment's interpreter.
_PROBE = """\
import importlib.metadata as md, json, re, sys
missing = []
for req in json.loads(sys.argv[1]):
    name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
    spec = re.sub(r"^\\[[^\\]]*\\]", "", req[len(name):]).strip()  # extras are not checked
    try:
        have = md.version(name)
        if spec:  # a version is checked where packaging is installed, else counts as missing
            from packaging.specifiers import SpecifierSet
            if not SpecifierSet(spec).contains(have, prereleases=True):
                raise LookupError(have)
    except Exception:
        missing.append(req)
print(json.dumps(missing))
"""


def with_packages(venv: Venv, packages: Sequence[str]) -> Venv:
    """``venv`` with ``packages`` added: a new cached spec (``venv`` itself
    when it has them all already)."""
    added = [p for p in packages if p not in venv.packages]
    if not added:
        return venv
    return Venv(python=venv.python, packages=(*venv.packages, *added), requirements=venv.requirements,
                installer=venv.installer)


def missing_packages(python: str, packages: Sequence[str]) -> list[str]:
    """The requirements of ``packages`` the interpreter ``python`` does not satisfy."""
    if not packages:
        return []
    try:
        done = subprocess.run([python, "-c", _PROBE, json.dumps(list(packages))], capture_output=True,
                              text=True, timeout=PROBE_TIMEOUT_S)
        found = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        raise EnvironmentSetupError(f"could not check the packages {', '.join(packages)} with {python}: "
                                    f"{exc}") from None
    return [p for p in packages if p in found]


def require_packages(environment: Environment, python: str, packages: Sequence[str], needed_by: str) -> None:
    """Raise ``ConfigurationError`` naming the packages of ``packages`` that
    ``python`` (the interpreter of ``environment``, which execbox does not
    install into) lacks, and how to get them."""
    missing = missing_packages(python, packages)
    if not missing:
        return
    names = ", ".join(missing)
    where = (f"the Venv at {environment.path}, which is yours (execbox installs only into the venvs of its cache)"
             if isinstance(environment, Venv) else
             f"{environment!r}, a Python execbox never installs into")
    raise ConfigurationError(
        f"{needed_by} need{'s' if len(missing) == 1 else ''} {names}, not installed in {where}: use "
        f"environment=Venv() (execbox creates and caches a venv with them), or install them there "
        f"(pip install {' '.join(missing)})"
    )
