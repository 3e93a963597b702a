"""Finding a Python interpreter by version: ``Venv(python="3.11")`` and
``SystemPython("3.11")``, as AG2's ``python_version=`` is used.

Where it looks, in order, taking the first that runs and reports that
version: ``python3.11`` on PATH (a pyenv shim of a version not selected
fails to run and is passed over), the interpreter running execbox,
``uv python find 3.11`` when uv is there (interpreters uv installed or sees
on PATH; never a download), and pyenv's installed versions. Nothing is
downloaded: a version that is not on this machine is an error naming what
to install.
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator

from .._errors import EnvironmentSetupError

__all__ = ["find_uv", "find_version", "is_version"]

_VERSION = re.compile(r"^\d+(?:\.\d+){0,2}$")
_ASK = "import sys; print(sys.executable); print('.'.join(map(str, sys.version_info[:3])))"
PROBE_TIMEOUT_S = 30


def is_version(text: str) -> bool:
    """``"3"``, ``"3.11"`` or ``"3.11.7"``: a version, not a program name."""
    return bool(_VERSION.match(text))


def find_version(version: str) -> str:
    """The absolute path of a Python ``version`` on this machine."""
    for candidate in _candidates(version):
        found = _identify(candidate)
        if found is not None and (found[1] == version or found[1].startswith(version + ".")):
            return found[0]
    short = ".".join(version.split(".")[:2])
    raise EnvironmentSetupError(
        f"Python {version} is not on this machine (python={version!r}): looked for python{short} on PATH, "
        f"the running interpreter, `uv python find {version}` and pyenv's versions. Install it "
        f"(apt-get install python{short}, `uv python install {version}` or `pyenv install {version}`), "
        "or give an interpreter's path: python='/usr/bin/python3.x'"
    )


def find_uv() -> str | None:
    """uv's program: on PATH, or the one the ``uv`` package installed."""
    found = shutil.which("uv")
    if found:
        return found
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


def _candidates(version: str) -> Iterator[str]:
    short = ".".join(version.split(".")[:2])
    on_path = shutil.which(f"python{short}")
    if on_path:
        yield on_path
    yield getattr(sys, "_base_executable", "") or sys.executable
    uv = find_uv()
    if uv:
        # from / and outside any venv: uv would answer with a venv's interpreter first
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "CONDA_PREFIX")}
        env["UV_PYTHON_DOWNLOADS"] = "never"
        try:
            done = subprocess.run(
                [uv, "python", "find", version],
                capture_output=True,
                text=True,
                cwd="/",
                env=env,
                timeout=PROBE_TIMEOUT_S,
            )
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0 and done.stdout.strip():
            yield done.stdout.strip().splitlines()[-1]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for folder in sorted(glob.glob(os.path.join(glob.escape(root), "versions", version + "*")), reverse=True):
        yield os.path.join(folder, "bin", f"python{short}" if "." in short else "python3")


def _identify(path: str) -> tuple[str, str] | None:
    """(the real interpreter, its version) of ``path``; None if it does not run."""
    if not os.path.isfile(path):
        return None
    try:
        done = subprocess.run([path, "-c", _ASK], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or len(lines) != 2:
        return None
    return lines[0], lines[1]
