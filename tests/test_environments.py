"""Environments as AG2 users make them: a Python by version, and ``with``."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from execbox import CodeBlock, EnvironmentSetupError, LocalExecutor, SystemPython, Venv
from execbox.environments._interpreters import find_uv
from tests.conftest import require

RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"


def version_of(python: str) -> str:
    return subprocess.run(
        [python, "-c", "import sys; print(*sys.version_info[:2], sep='.')"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.mark.parametrize("version", [RUNNING, "3", f"{RUNNING}.{sys.version_info.micro}"])
def test_system_python_by_version(version):
    python = SystemPython(version).prepare()
    assert version_of(python).startswith(".".join(version.split(".")[:2]))


def test_venv_of_a_python_version(cache):
    venv = Venv(python=RUNNING)
    with LocalExecutor(environment=venv) as executor:
        result = executor.run(CodeBlock("python", "import sys; print(sys.prefix)"))
    assert result.output.strip() == str(venv.path)
    assert version_of(str(venv.path / "bin" / "python")) == RUNNING
    assert venv.path.parent == cache / "venvs"


def test_another_installed_version_is_found(cache):
    # 3.12 where pyenv, uv or the system has it (this machine's pyenv 3.12 is not on PATH as a working shim)
    try:
        python = SystemPython("3.12").prepare()
    except EnvironmentSetupError as exc:
        require("Python 3.12", False, f"not installed here ({exc})")
    assert version_of(python) == "3.12"
    with Venv(python="3.12") as venv:
        assert version_of(str(venv.path / "bin" / "python")) == "3.12"


def test_a_missing_version_names_what_to_install(cache):
    with pytest.raises(EnvironmentSetupError) as caught:
        Venv(python="3.99").prepare()
    message = str(caught.value)
    assert "Python 3.99 is not on this machine" in message
    assert "apt-get install python3.99" in message and "uv python install 3.99" in message
    if find_uv() is not None:
        assert "uv python find 3.99" in message


def test_with_venv_creates_it_and_keeps_it(cache):
    venv = Venv(python=RUNNING)
    assert not venv.path.exists()
    with venv as entered:
        assert entered is venv
        assert (venv.path / "bin" / "python").exists()  # made on entering, as create_virtual_env does
    assert (venv.path / "bin" / "python").exists()  # cached by spec for every executor of that spec


def test_with_a_venv_at_a_path_leaves_it(tmp_path, cache):
    with Venv(tmp_path / "myenv") as venv:
        with LocalExecutor(environment=venv) as executor:
            assert executor.run(CodeBlock("python", "print(1)")).ok
    assert (tmp_path / "myenv" / "bin" / "python").exists()


def test_with_system_python_checks_it_on_entering():
    with SystemPython() as system:
        assert system.prepare()
    with pytest.raises(EnvironmentSetupError, match="not found"):
        with SystemPython("/no/such/python"):
            pass


PYENV_SAYS = (
    "pyenv: {name}: command not found\n\n"
    "The `{name}' command exists in these Python versions:\n  {version}.1\n\n"
    "Note: See 'pyenv help global' for tips on allowing multiple\n"
    "      Python versions to be found at the same time.\n"
)


def _inactive_shim(folder, version: str, said: str | None = None) -> str:
    """A pyenv shim of a version not selected here: it says so on stderr and exits 127."""
    name = f"python{version}"
    folder.mkdir()
    shim = folder / name
    text = said if said is not None else PYENV_SAYS.format(name=name, version=version)
    (folder / "said.txt").write_text(text)
    shim.write_text(f"#!/bin/sh\n/bin/cat '{folder / 'said.txt'}' >&2\nexit 127\n")
    shim.chmod(0o755)
    return str(shim)


@pytest.fixture
def shims(tmp_path, monkeypatch):
    from execbox.environments import _system

    monkeypatch.setattr(_system, "_resolved", {})
    monkeypatch.setenv("PYENV_ROOT", str(tmp_path / "no-pyenv"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'shims'}{os.pathsep}{os.environ['PATH']}")
    return tmp_path / "shims"


def test_a_name_whose_shim_does_not_run_is_found_as_its_version(shims):
    # (was: "returned non-zero exit status 127", where Venv(python=...) finds the version)
    shim = _inactive_shim(shims, RUNNING)
    python = SystemPython(f"python{RUNNING}").prepare()
    assert python != shim and version_of(python) == RUNNING


def test_a_shim_that_does_not_run_is_quoted_in_the_error(shims, monkeypatch):
    _inactive_shim(shims, "3.99")
    monkeypatch.setenv("PATH", str(shims))  # nothing else of 3.99 either
    with pytest.raises(EnvironmentSetupError) as caught:
        SystemPython("python3.99").prepare()
    message = str(caught.value)
    assert "does not run as a Python interpreter (exit status 127)" in message
    assert "pyenv: python3.99: command not found" in message
    assert "The `python3.99' command exists in these Python versions" in message
    assert "Python 3.99 is not on this machine" in message and "pyenv install 3.99" in message


def test_what_a_failing_interpreter_says_is_bounded(shims):
    _inactive_shim(shims, "-wrapper", said="x" * 100_000)  # python-wrapper: no version in its name
    with pytest.raises(EnvironmentSetupError) as caught:
        SystemPython("python-wrapper").prepare()
    message = str(caught.value)
    assert "x" * 1000 in message and len(message) < 2000
    assert "SystemPython('3.12')" in message
