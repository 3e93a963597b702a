"""Executors saved as JSON and loaded back."""

from __future__ import annotations

import json

import pytest

import execbox
from execbox import CodeBlock, ConfigurationError, Limits, executor_from_config


def _round_trip(executor: execbox.Executor) -> execbox.Executor:
    text = json.dumps(executor.to_config())
    return executor_from_config(json.loads(text))


def test_local_executor_round_trip_keeps_options_and_runs(tmp_path):
    ex = execbox.LocalExecutor(
        workspace=tmp_path,
        limits=Limits(timeout_s=7, memory_mb=300),
        env={"GREETING": "hi"},
        execution_policies={"bash": False},
    )
    try:
        config = ex.to_config()
        assert config["backend"] == "local"
        assert config["options"]["workspace"] == str(tmp_path)
        assert config["options"]["limits"]["timeout_s"] == 7
        loaded = _round_trip(ex)
    finally:
        ex.close()
    with loaded:
        assert isinstance(loaded, execbox.LocalExecutor)
        assert loaded.limits == Limits(timeout_s=7, memory_mb=300)
        assert loaded.workspace.path == tmp_path
        assert loaded.policies["bash"] == ex.policies["bash"] == "save"
        result = loaded.run(CodeBlock("python", "import os; print(os.environ['GREETING'])"))
        assert result.output == "hi\n"


def test_temporary_workspace_is_not_saved():
    with execbox.LocalExecutor() as ex:
        assert "workspace" not in ex.to_config()["options"]
        loaded = _round_trip(ex)
        try:
            assert loaded.workspace.path != ex.workspace.path
        finally:
            loaded.close()


def test_environments_round_trip(tmp_path):
    venv = execbox.Venv(packages=["six"], python=None)
    ex = execbox.SandboxExecutor(environment=venv, pool=False, tmp_size_mb=64)
    try:
        options = ex.to_config()["options"]
        assert options["environment"]["type"] == "venv"
        assert options["environment"]["packages"] == ["six"]
        loaded = _round_trip(ex)
    finally:
        ex.close()
    try:
        assert isinstance(loaded.environment, execbox.Venv)
        assert loaded.environment.packages == ("six",)
        assert loaded.environment.path == venv.path
    finally:
        loaded.close()
    docker = execbox.DockerExecutor(
        environment=execbox.DockerPython(pip_packages=["matplotlib"]), runtime="runsc", pass_env=["HOME"]
    )
    try:
        loaded = _round_trip(docker)
        assert loaded.to_config() == docker.to_config()
        assert loaded.environment.pip_packages == ("matplotlib",)
    finally:
        docker.close()
        loaded.close()


def test_jupyter_connection_round_trips():
    info = execbox.JupyterConnectionInfo(host="127.0.0.1", port=8888, token="t")
    ex = execbox.JupyterExecutor(kernel=info)
    try:
        loaded = _round_trip(ex)
        assert loaded.to_config() == ex.to_config()
    finally:
        ex.close()
        loaded.close()


def test_an_option_that_is_not_data_names_itself():
    ex = execbox.LocalExecutor(on_progress=print)
    try:
        with pytest.raises(ConfigurationError, match=r"option on_progress=.*cannot be saved"):
            ex.to_config()
    finally:
        ex.close()


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"options": {}}, "mapping with 'backend'"),
        ({"backend": "nope"}, "unknown backend 'nope'"),
        (
            {"backend": "local", "options": {"limits": {"type": "limits", "timeout_s": -1}}},
            "timeout_s must be",
        ),
        ({"backend": "local", "options": {"environment": {"type": "conda"}}}, "unknown type 'conda'"),
        ({"backend": "local", "options": {"limits": {"type": "limits", "speed": 1}}}, "does not fit"),
    ],
)
def test_bad_configs_say_what_to_change(bad, message):
    with pytest.raises(ConfigurationError, match=message):
        executor_from_config(bad)
