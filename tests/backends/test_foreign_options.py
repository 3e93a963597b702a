"""AG2's and AutoGen's option names get a TypeError naming execbox's spelling."""

from __future__ import annotations

import pytest

from execbox import (
    DockerExecutor,
    JupyterExecutor,
    LocalExecutor,
    SandboxExecutor,
    SystemPython,
    Venv,
    create_executor,
)
from execbox._foreign import EXECUTOR_HINTS

EXECUTORS = [LocalExecutor, SandboxExecutor, DockerExecutor, JupyterExecutor]


@pytest.mark.parametrize("cls", EXECUTORS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "name, value, hint",
    [
        ("timeout", 30, "limits=Limits(timeout_s=...)"),
        ("work_dir", "work", "workspace="),
        ("virtual_env_context", object(), "environment=Venv(path=...)"),
        ("venv_path", ".venv", "environment=Venv(path=...)"),
        ("cleanup_temp_files", True, "keep_code_files=False"),
    ],
)
def test_executor_constructors_name_the_execbox_spelling(cls, name, value, hint):
    # refused before anything starts: no backend needs to be installed for this
    with pytest.raises(TypeError) as caught:
        cls(**{name: value})
    message = str(caught.value)
    assert f"{cls.__name__}() got an unexpected keyword argument {name!r}" in message
    assert hint in message


@pytest.mark.parametrize("backend", ["local", "sandbox", "docker", "jupyter"])
def test_create_executor_names_the_execbox_spelling(backend):
    with pytest.raises(TypeError, match=r"'timeout': use limits=Limits\(timeout_s=\.\.\.\)"):
        create_executor(backend, timeout=60)
    with pytest.raises(TypeError, match="'work_dir': use workspace="):
        create_executor(backend, work_dir="coding")


def test_venv_names_its_spelling():
    with pytest.raises(TypeError, match=r"'python_version': use python=\"3.11\""):
        Venv(python_version="3.11")
    with pytest.raises(TypeError, match=r"'venv_path': use path=\.\.\. \(Venv\(path=\.\.\.\)\)"):
        Venv(venv_path=".venv")
    with pytest.raises(TypeError, match="'python_version'"):
        SystemPython(python_version="3.11")


def test_other_unknown_options_keep_pythons_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        LocalExecutor(bogus=1)


def test_an_option_a_backend_has_is_never_refused():
    # each hint is for a name no built-in backend takes (but inherit_env, the local backend's own,
    # refused with a hint by the others); were one to take it, it would be used
    for cls in EXECUTORS:
        from execbox._foreign import _accepted

        accepted = _accepted(cls)
        own = {"inherit_env"} if cls is LocalExecutor else set()
        assert accepted is not None and accepted & set(EXECUTOR_HINTS) == own, cls

    # a subclass that takes one of the names gets it
    class Timed(LocalExecutor):
        def __init__(self, *, timeout: float = 1.0, **options):
            super().__init__(**options)
            self.timeout = timeout

    executor = Timed(timeout=5)
    try:
        assert executor.timeout == 5
    finally:
        executor.close()


@pytest.mark.parametrize("cls", [SandboxExecutor, DockerExecutor, JupyterExecutor], ids=lambda c: c.__name__)
def test_only_the_local_backend_passes_the_hosts_environment(cls):
    with pytest.raises(TypeError, match=r"only LocalExecutor passes the host's environment.*env=\{"):
        cls(inherit_env=True)
    assert LocalExecutor(inherit_env=True).inherit_env is True
