"""Environments as AG2 users make them: a Python by version, and ``with``."""

from __future__ import annotations

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
