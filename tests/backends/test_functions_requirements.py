"""functions=[...] takes AG2's and AutoGen's FunctionWithRequirements
(``@with_requirements``) and FunctionWithRequirementsStr: their source,
global imports and packages (installed into a Venv execbox owns; refused,
naming them, where it cannot install)."""

from __future__ import annotations

import asyncio

import pytest

from execbox import CodeBlock, ConfigurationError, LocalExecutor, SandboxExecutor, SystemPython, Venv
from execbox.backends.sandbox import find_bwrap
from tests._lazy import LazyModule, missing
from tests.conftest import require

# imported at first use (tests/_lazy.py): AG2 costs each collecting worker ~3 s
MISSING = missing("autogen", "autogen_core", hint="pip install 'execbox[ag2,autogen]' (./dev.sh does)")
fns = LazyModule("tests.backends._requirement_functions")


@pytest.fixture(autouse=True)
def _needs_the_frameworks() -> None:
    require("ag2 and autogen-core", MISSING is None, MISSING or "")


USE = (
    "from functions import circle, doubled, triple, quadruple\n"
    "print(circle(1.0)); print(doubled([1, 2])); print(triple(2), quadruple(2))\n"
    "import functions; print(functions.root(16.0), functions.j.__name__)"
)
EXPECTED = '{"radius":1.0,"area":3.14}\n[2, 4]\n6 8\n4.0 json\n'


def every_kind() -> list:  # type: ignore[type-arg]
    return [fns.circle, fns.doubled, fns.autogen_str, fns.ag2_str]


def test_both_frameworks_functions_run_with_their_imports(tmp_path):
    with LocalExecutor(
        workspace=tmp_path / "ws", functions=every_kind()
    ) as executor:  # pydantic is installed here
        assert executor.functions.packages == ("pydantic",)
        result = executor.run(CodeBlock("python", USE))
    assert result.output == EXPECTED, result.output
    prompt = executor.functions_prompt
    assert "def circle(r: float) -> str:" in prompt and '"""A circle of radius r, as JSON."""' in prompt
    assert "def triple(x: int) -> int:" in prompt and "def quadruple(x):" in prompt
    assert "with_requirements" not in executor.functions.source()  # the decorators stay on the host


def test_the_ag2_adapter_takes_them():
    from autogen.coding import CodeBlock as AG2Block

    from execbox.integrations.ag2 import AG2CodeExecutor

    with AG2CodeExecutor(backend="local", functions=every_kind()) as runner:
        result = runner.execute_code_blocks([AG2Block(code=USE, language="python")])
    assert result.exit_code == 0 and result.output == EXPECTED, result.output


def test_the_autogen_adapter_takes_them():
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock as AutoGenBlock

    from execbox.integrations.autogen import AutoGenCodeExecutor

    async def scenario():
        runner = AutoGenCodeExecutor(backend="local", functions=every_kind())
        try:
            return await runner.execute_code_blocks(
                [AutoGenBlock(code=USE, language="python")], CancellationToken()
            )
        finally:
            await runner.stop()

    result = asyncio.run(scenario())
    assert result.exit_code == 0 and result.output == EXPECTED, result.output


def test_a_system_python_without_the_packages_is_refused_by_name(tmp_path):
    executor = LocalExecutor(
        workspace=tmp_path / "ws", functions=[fns.needs_missing], environment=SystemPython()
    )
    with pytest.raises(ConfigurationError) as caught:
        executor.run(CodeBlock("python", "print(1)"))
    executor.close()
    message = str(caught.value)
    assert "execbox-surely-not-a-package>=1" in message
    assert "never installs into" in message and "environment=Venv()" in message


def test_a_venv_of_the_users_path_is_not_installed_into(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    venv = Venv(tmp_path / "mine")
    executor = LocalExecutor(workspace=tmp_path / "ws", functions=[fns.needs_missing], environment=venv)
    assert executor.environment is venv
    with pytest.raises(ConfigurationError, match=r"the Venv at .*mine, which is yours"):
        executor.run(CodeBlock("python", "print(1)"))
    executor.close()


def test_a_cached_venv_grows_the_functions_packages(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    executor = LocalExecutor(functions=[fns.six_kind], environment=Venv(packages=["tomli"]))
    assert executor.environment.packages == ("tomli", "six")  # made at construction, installed at start
    executor.close()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_packages_are_installed_into_a_venv_execbox_owns(tmp_path, monkeypatch, backend):
    if backend == "sandbox":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    cls = SandboxExecutor if backend == "sandbox" else LocalExecutor
    with cls(workspace=tmp_path / "ws", functions=[fns.six_kind], environment=Venv()) as executor:
        result = executor.run(
            CodeBlock(
                "python", "from functions import six_kind\nprint(six_kind())\nimport sys; print(sys.prefix)"
            )
        )
    assert result.ok, result.output
    kind, prefix = result.output.split()
    assert kind == "py3" and prefix == str(executor.environment.path)
    assert executor.environment.packages == ("six",)


@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_a_global_import_that_fails_where_blocks_run_is_refused_by_name(tmp_path, backend):
    # checked with the blocks' Python where they run (the sandbox's: in its jail), at the
    # first run, and at every run after: never a ModuleNotFoundError inside the blocks
    if backend == "sandbox":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    cls = SandboxExecutor if backend == "sandbox" else LocalExecutor
    executor = cls(workspace=tmp_path / "ws", functions=[fns.bad_import, fns.circle])
    try:
        for _ in range(2):
            with pytest.raises(ConfigurationError) as caught:
                executor.run(CodeBlock("python", "open('never', 'w').write('ran')"))
            message = str(caught.value)
            assert "'from execbox_surely_not_a_module import thing' (global_imports of bad_import)" in message
            assert "ModuleNotFoundError: No module named 'execbox_surely_not_a_module'" in message
            assert f"the {backend} backend's" in message and "global_imports=[...]" in message
            assert "'import json'" not in message and "pydantic" not in message  # those load
    finally:
        executor.close()
    assert not (tmp_path / "ws" / "never").exists()


def test_global_imports_that_load_pass_the_check(tmp_path):
    with LocalExecutor(workspace=tmp_path / "ws", functions=[fns.circle, fns.doubled]) as executor:
        assert executor.run(CodeBlock("python", "from functions import doubled; print(doubled([2]))")).ok
        assert executor.run(CodeBlock("python", "print(2)")).output == "2\n"
