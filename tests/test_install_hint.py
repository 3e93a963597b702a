"""How to install an extra: execbox is not on the package index and ``pip``
may not be on PATH, so every message names a command that works as printed
(``install_hint``), and no bare ``pip install 'execbox[...]'`` is left in
the package."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from execbox._errors import install_hint

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "execbox"
EXTRAS = sorted(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
# the advice no one can follow: execbox is on no index, and pip may be on no PATH
BARE = re.compile(r"pip3? install (?:-U )?['\"]?execbox\[")


@pytest.mark.parametrize("extra", EXTRAS)
def test_the_hint_of_every_extra_is_a_command_that_works_from_this_checkout(extra):
    hint = install_hint(extra)
    argv = shlex.split(hint.split(" (")[0])
    # this interpreter's pip, on this checkout, editable, with the extra
    assert argv[:5] == [sys.executable, "-m", "pip", "install", "-e"], hint
    assert argv[5] == f"{ROOT}[{extra}]", hint
    assert extra in EXTRAS  # the checkout declares it
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, text=True, timeout=60
    )
    assert pip.returncode == 0, pip.stderr  # the command's program is there


def test_outside_a_checkout_the_hint_names_the_wheel(tmp_path):
    """A copy of the package with no checkout around it (as a wheel installs it)."""
    shutil.copytree(PACKAGE, tmp_path / "site" / "execbox", ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run(
        [sys.executable, "-c", "from execbox._errors import install_hint; print(install_hint('server'))"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    from execbox._version import __version__

    assert f"-m pip install 'execbox-{__version__}-py3-none-any.whl[server]'" in done.stdout
    assert "python -m build" in done.stdout and "-e '.[server]'" in done.stdout


def test_no_bare_pip_install_of_execbox_is_left_in_the_package():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*"))
        if path.is_file()
        and "__pycache__" not in path.parts
        and path.suffix in (".py", ".html", ".js", ".md")
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if BARE.search(line)
    ]
    assert not found, "use execbox._errors.install_hint(extra):\n" + "\n".join(found)


def test_the_cli_names_the_command_when_the_server_extra_is_missing():
    """``execbox serve`` without the server extra: one line, exit 2, the working command."""
    code = (
        "import sys\nsys.modules['starlette'] = None  # as if the extra were not installed\n"
        "from execbox.cli import main\nraise SystemExit(main(['serve', '--port', '0']))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert install_hint("server") in done.stderr and "\n" not in done.stderr.strip()
    helped = subprocess.run(
        [sys.executable, "-m", "execbox.cli", "serve", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "-m pip install -e" in helped.stdout and "[server]" in helped.stdout
