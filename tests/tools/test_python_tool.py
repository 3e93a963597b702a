"""PythonTool: the function-calling tool, with real executors."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading

import pytest

from execbox import (
    CodeBlock,
    ConfigurationError,
    DockerExecutor,
    DockerPython,
    JupyterExecutor,
    Limits,
    LocalExecutor,
    SystemPython,
    Venv,
)
from execbox.backends.sandbox import find_bwrap
from execbox.tools import PythonTool
from tests.conftest import require, require_docker

jsonschema = pytest.importorskip("jsonschema")

KEYS = {"success", "stdout", "stderr", "error", "files"}
MISSING = "execbox-no-such-package-zz"


def require_bwrap() -> None:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


@pytest.fixture
def tool(tmp_path):
    with PythonTool(backend="local", workspace=tmp_path / "ws", timeout=10) as made:
        yield made


# -- schemas ------------------------------------------------------------------


def check_parameters(parameters: dict, *, strict: bool) -> None:
    jsonschema.Draft202012Validator.check_schema(parameters)
    assert parameters["type"] == "object"
    assert set(parameters["properties"]) == {"code", "libraries"}
    assert parameters["properties"]["code"]["type"] == "string"
    assert parameters["properties"]["libraries"]["items"] == {"type": "string"}
    assert parameters["required"] == (["code", "libraries"] if strict else ["code"])
    assert parameters["additionalProperties"] is False
    valid = jsonschema.Draft202012Validator(parameters)
    assert valid.is_valid({"code": "print(1)", "libraries": ["six", "numpy>=1"]})
    assert valid.is_valid({"code": "print(1)", "libraries": None}) is strict
    assert valid.is_valid({"code": "print(1)"}) is not strict
    for bad in (
        {},
        {"libraries": ["six"]},
        {"code": 1},
        {"code": "x", "libraries": "six"},
        {"code": "x", "libraries": [1]},
        {"code": "x", "script": "y"},
    ):
        assert not valid.is_valid(bad), bad


def test_openai_and_anthropic_schemas_have_exactly_the_arguments(tool):
    openai = json.loads(json.dumps(tool.openai_schema()))  # plain JSON all the way down
    assert set(openai) == {"type", "function"} and openai["type"] == "function"
    assert set(openai["function"]) == {"name", "description", "parameters"}
    assert openai["function"]["name"] == "python"
    check_parameters(openai["function"]["parameters"], strict=False)

    anthropic = json.loads(json.dumps(tool.anthropic_schema()))
    assert set(anthropic) == {"name", "description", "input_schema"}
    assert anthropic["name"] == "python"
    assert anthropic["description"] == openai["function"]["description"]
    check_parameters(anthropic["input_schema"], strict=False)


def test_strict_openai_schema_requires_every_argument(tool):
    schema = tool.openai_schema(strict=True)
    assert schema["function"]["strict"] is True
    check_parameters(schema["function"]["parameters"], strict=True)


def test_description_follows_the_environment(tool):
    text = tool.description
    assert "fresh Python process" in text and "10 s" in text
    assert "none can be installed" in text  # SystemPython installs nothing
    assert "must be installed already" in tool.parameters()["properties"]["libraries"]["description"]
    assert not tool.can_install
    venv_tool = PythonTool(backend="local", environment=Venv())
    try:
        assert venv_tool.can_install and "are installed before it runs" in venv_tool.description
    finally:
        venv_tool.close()
    named = PythonTool(backend="local", name="run_py", description="Runs it.")
    try:
        assert named.openai_schema()["function"]["name"] == "run_py"
        assert named.anthropic_schema()["description"] == "Runs it."
    finally:
        named.close()


def test_bad_options_name_the_fix(tmp_path):
    with pytest.raises(ConfigurationError, match="1 to 64 letters"):
        PythonTool(backend="local", name="has space")
    with pytest.raises(ConfigurationError, match="positive number of seconds"):
        PythonTool(backend="local", timeout=0)
    with LocalExecutor(workspace=tmp_path) as executor:
        with pytest.raises(ConfigurationError, match="executor= or backend=/timeout=, not both"):
            PythonTool(executor, backend="local", timeout=5)
    with pytest.raises(ConfigurationError, match="docker backend"):
        PythonTool(backend="local", environment=DockerPython())


# -- calls --------------------------------------------------------------------


def test_success_and_failure_dicts(tool):
    assert tool("print(6 * 7)") == {
        "success": True,
        "stdout": "42\n",
        "stderr": "",
        "error": None,
        "files": [],
    }
    failed = tool("print('before')\n1 / 0")
    assert set(failed) == KEYS
    assert failed["success"] is False and failed["stdout"] == "before\n"
    assert failed["error"] == "ZeroDivisionError: division by zero"
    assert "Traceback" in failed["stderr"] and "ZeroDivisionError" in failed["stderr"]
    assert tool("import sys; sys.exit(3)")["error"] == "ExitStatus: exit code 3"
    assert tool("raise SystemExit(0)")["success"] is True


def test_timeout_is_reported_with_the_setting(tmp_path):
    with PythonTool(backend="local", workspace=tmp_path, timeout=1) as tool:
        out = tool("import time\nprint('started', flush=True)\ntime.sleep(30)")
    assert out["success"] is False and out["stdout"] == "started\n"
    assert out["error"].startswith("Timeout: the code ran longer than 1 s")
    assert "PythonTool(timeout=...)" in out["error"]


def test_call_takes_json_text_or_a_dict(tool):
    assert tool.call('{"code": "print(1 + 1)"}')["stdout"] == "2\n"
    assert tool.call(b'{"code": "print(3)", "libraries": null}')["stdout"] == "3\n"
    assert tool.call({"code": "print('dict')", "libraries": []})["stdout"] == "dict\n"


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ('{"code": "print(1)"', "not valid JSON"),
        ("", "not valid JSON"),
        ('["print(1)"]', "must be a JSON object"),
        ('{"libraries": ["six"]}', "'code' is missing"),
        ('{"code": "print(1)", "script": "x"}', "unknown argument 'script'"),
        ('{"code": 5}', "'code' must be a string"),
        ('{"code": "   "}', "'code' is empty"),
        ('{"code": "print(1)", "libraries": "six"}', "'libraries' must be an array"),
        ('{"code": "print(1)", "libraries": ["--index-url=http://evil"]}', "not a PyPI requirement"),
        ('{"code": "print(1)", "libraries": ["git+https://x/y.git"]}', "not a PyPI requirement"),
    ],
)
def test_malformed_arguments_give_an_error_dict(tool, arguments, expected):
    out = tool.call(arguments)
    assert set(out) == KEYS and out["success"] is False
    assert out["error"].startswith("InvalidArguments: ") and expected in out["error"], out["error"]
    assert tool.workspace.snapshot() == {}  # nothing ran


def test_files_created_or_changed_are_reported(tool):
    out = tool(
        "import os\nos.makedirs('out', exist_ok=True)\nopen('out/a.txt', 'w').write('a')\n"
        "open('b.txt', 'w').write('b')"
    )
    assert out["success"] and out["files"] == ["b.txt", "out/a.txt"]
    assert (tool.workspace.path / "out" / "a.txt").read_text() == "a"
    assert tool("print(open('b.txt').read())") == {
        "success": True,
        "stdout": "b\n",
        "stderr": "",
        "error": None,
        "files": [],
    }
    assert tool("open('b.txt', 'a').write('bb')")["files"] == ["b.txt"]


def test_async_calls_match_sync_ones(tool):
    code = '{"code": "import sys; print(sys.argv[0].endswith(\\".py\\")); print(\\"err\\", file=sys.stderr)"}'
    expected = tool.call(code)
    assert expected["stdout"] == "True\n" and expected["stderr"] == "err\n"
    assert asyncio.run(tool.acall(code)) == expected
    assert asyncio.run(tool.arun("1/0"))["error"] == "ZeroDivisionError: division by zero"
    assert asyncio.run(tool.acall("{"))["error"].startswith("InvalidArguments")


def test_a_given_executor_stays_open_and_its_limits_are_named(tmp_path):
    with LocalExecutor(workspace=tmp_path, limits=Limits(timeout_s=1)) as executor:
        with PythonTool(executor) as tool:
            assert tool.executor is executor
            out = tool("import time; time.sleep(30)")
            assert "the executor's Limits.timeout_s" in out["error"]
        assert executor.run(CodeBlock("python", "print('open')")).stdout == "open\n"


# -- backends and environments -------------------------------------------------


def test_sandbox_with_system_python(tmp_path):
    require_bwrap()
    with PythonTool(workspace=tmp_path, timeout=10) as tool:  # the default backend
        assert tool.executor.name == "sandbox"
        assert tool("x = 1\nopen('x.txt', 'w').write(str(x))") == {
            "success": True,
            "stdout": "",
            "stderr": "",
            "error": None,
            "files": ["x.txt"],
        }
        again = tool("print(open('x.txt').read())\nprint(x)")  # files carry over, variables do not
        assert again["stdout"] == "1\n" and again["error"] == "NameError: name 'x' is not defined"
        outcomes: list[dict] = []
        threads = [
            threading.Thread(target=lambda i=i: outcomes.append(tool(f"print({i} * 2)"))) for i in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert sorted(o["stdout"] for o in outcomes) == ["0\n", "2\n", "4\n", "6\n"]


@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_system_python_cannot_install_and_says_how_to(tmp_path, backend):
    if backend == "sandbox":
        require_bwrap()
    with PythonTool(backend=backend, workspace=tmp_path, environment=SystemPython()) as tool:
        out = tool("print('never')", libraries=[MISSING, "pytest"])
        assert out["success"] is False and out["stdout"] == ""
        assert out["error"].startswith(f"LibrariesUnavailable: {MISSING} is not installed")
        assert "PythonTool(environment=Venv())" in out["error"] and "DockerPython" in out["error"]
        # installed ones pass (pytest runs this test), whatever the spelling
        assert tool("import pytest; print('ok')", libraries=["PyTest", "pytest>=1"])["stdout"] == "ok\n"
        assert tool("print(1)", libraries=["pytest>=999"])["error"].startswith("LibrariesUnavailable")
        assert isinstance(tool.executor.environment, SystemPython)


def test_jupyter_keeps_state_and_cannot_install(tmp_path):
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    with PythonTool(backend="jupyter", workspace=tmp_path, timeout=20) as tool:
        assert "share one Python session" in tool.description
        assert tool("x = 41")["success"]
        assert tool.call('{"code": "print(x + 1)"}')["stdout"] == "42\n"
        out = tool("print(x)", libraries=[MISSING])
        assert out["success"] is False and "jupyter backend" in out["error"]
        assert tool("print(x)", libraries=["ipykernel"])["stdout"] == "41\n"


def test_executors_say_whether_they_can_add_libraries(tmp_path, monkeypatch):
    """What the tool asks of any executor: no backend classes tested."""
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    system = LocalExecutor(workspace=tmp_path / "a", environment=SystemPython())
    owned = LocalExecutor(workspace=tmp_path / "b", environment=Venv(packages=["tomli"]))
    users = LocalExecutor(workspace=tmp_path / "c", environment=Venv(tmp_path / "mine"))
    docker = DockerExecutor(workspace=tmp_path / "d")
    jupyter = JupyterExecutor(workspace=tmp_path / "e", kernel="local")
    try:
        assert "shared system Python" in system.can_add_libraries()
        with pytest.raises(
            ConfigurationError, match=r"cannot add six to this local executor: .*system Python"
        ):
            system.with_libraries(["six"])
        assert owned.can_add_libraries() is None and docker.can_add_libraries() is None
        assert "path of its own" in users.can_add_libraries()
        assert "jupyter backend" in jupyter.can_add_libraries()
        assert isinstance(docker.environment, DockerPython) and jupyter.environment is not None
        with pytest.raises(ConfigurationError, match="takes a DockerPython"):
            docker.use_environment(Venv())
        owned.use_environment(SystemPython())  # a switch restarts; the next run uses it
        assert isinstance(owned.environment, SystemPython)
    finally:
        for executor in (system, owned, users, docker, jupyter):
            executor.close()


@pytest.mark.slow
def test_venv_installs_libraries_and_keeps_them(tmp_path, monkeypatch):
    require_bwrap()
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    with PythonTool(environment=Venv(), workspace=tmp_path / "ws") as tool:
        before = tool("import six")
        assert before["success"] is False and before["error"] == "ModuleNotFoundError: No module named 'six'"
        out = tool("import six, sys; print(six.__name__, sys.prefix)", libraries=["six"])
        assert out["success"], out
        assert out["stdout"].startswith("six " + str(tmp_path / "cache" / "venvs"))
        environment = tool.executor.environment
        assert environment.packages == ("six",)
        assert tool("import six; print('kept')")["stdout"] == "kept\n"  # later calls keep them
        assert tool("import six", libraries=["Six"])["success"] and tool.executor.environment is environment
        failed = tool("print(1)", libraries=[MISSING])
        assert failed["error"].startswith(f"LibraryInstallFailed: could not install {MISSING}")
        assert tool.executor.environment is environment and tool("import six")["success"]
    with PythonTool(backend="local", environment=Venv(), install_libraries=False) as fixed:
        refused = fixed("print(1)", libraries=["six"])
        assert "install_libraries=False" in refused["error"] and not fixed.can_install


def test_docker_with_matplotlib_image(tmp_path):
    require_docker()
    with PythonTool(environment=DockerPython(pip_packages=["matplotlib"]), workspace=tmp_path) as tool:
        assert tool.executor.name == "docker"
        out = tool(
            "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.savefig('plot.png')\nprint('ok')"
        )
        assert out == {"success": True, "stdout": "ok\n", "stderr": "", "error": None, "files": ["plot.png"]}
        assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
        assert tool.call('{"code": "[][0]"}')["error"] == "IndexError: list index out of range"
        assert tool("print(1)", libraries=["matplotlib"])["stdout"] == "1\n"  # present: nothing built


@pytest.mark.slow
def test_docker_libraries_build_a_derived_image(tmp_path):
    require_docker()
    base = DockerPython(pip_packages=["matplotlib"])
    with PythonTool(environment=base, workspace=tmp_path) as tool:
        assert tool("import six")["error"] == "ModuleNotFoundError: No module named 'six'"
        out = tool("import six, matplotlib; print(six.__name__, matplotlib.__name__)", libraries=["six"])
        assert out["stdout"] == "six matplotlib\n", out
        environment = tool.executor.environment
        assert environment is not base and set(environment.pip_packages) == {"matplotlib", "six"}
        assert tool("import six; print('kept')")["stdout"] == "kept\n"
