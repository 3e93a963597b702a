"""The AG2 and AutoGen adapters as drop-ins for the peers' local
command-line executors: their option names (``timeout=``, ``work_dir=``,
``virtual_env_context=``, ``cleanup_temp_files=``) and attributes
(``timeout``, ``work_dir``, ``functions_module``,
``format_functions_for_prompt()``), a function whose global import fails
refused at the first run, and ``code_file`` kept when cleanup removes it."""

from __future__ import annotations

import asyncio
import venv
from pathlib import Path

import pytest

from execbox import ConfigurationError, Limits, LocalExecutor
from tests._lazy import Lazy, LazyModule, missing
from tests.conftest import require

try:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock as AutoGenBlock

    from execbox.integrations.autogen import AutoGenCodeExecutor
except ImportError as exc:
    MISSING: str | None = f"{exc}: pip install 'execbox[ag2,autogen]'"
else:
    MISSING = missing("autogen", hint="pip install 'execbox[ag2,autogen]'")
# AG2's, imported at first use (tests/_lazy.py): it costs each collecting worker ~3 s
AG2Block = Lazy("autogen.coding", "CodeBlock")
AG2CodeExecutor = Lazy("execbox.integrations.ag2", "AG2CodeExecutor")
fns = LazyModule("tests.backends._requirement_functions")


@pytest.fixture(autouse=True)
def _needs_the_frameworks() -> None:
    require("ag2 and autogen-core", MISSING is None, MISSING or "")


def run_ag2(runner: AG2CodeExecutor, code: str):  # type: ignore[no-untyped-def]
    return runner.execute_code_blocks([AG2Block(code=code, language="python")])


def run_autogen(runner: AutoGenCodeExecutor, code: str):  # type: ignore[no-untyped-def]
    async def scenario():  # type: ignore[no-untyped-def]
        return await runner.execute_code_blocks(
            [AutoGenBlock(code=code, language="python")], CancellationToken()
        )

    return asyncio.run(scenario())


ADAPTERS = ["ag2", "autogen"]


def adapter(kind: str, **options):  # type: ignore[no-untyped-def]
    cls = AG2CodeExecutor if kind == "ag2" else AutoGenCodeExecutor
    return cls(backend="local", **options)


def run(kind: str, runner, code: str):  # type: ignore[no-untyped-def]
    return run_ag2(runner, code) if kind == "ag2" else run_autogen(runner, code)


@pytest.mark.parametrize("kind", ADAPTERS)
def test_timeout_and_work_dir_are_the_limit_and_the_workspace(kind, tmp_path):
    runner = adapter(kind, timeout=1, work_dir=tmp_path / "wd")
    try:
        assert runner.executor.limits.timeout_s == 1 and runner.timeout == 1
        assert runner.executor.workspace.path == (tmp_path / "wd").resolve()
        assert runner.work_dir == tmp_path / "wd"  # as given, as the peers keep it
        result = run(kind, runner, "import time\ntime.sleep(20)")
        assert result.exit_code == 124 and "timeout_s" in result.output, result.output
    finally:
        runner.executor.close()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_timeout_merges_into_the_limits_given(kind, tmp_path):
    runner = adapter(kind, timeout=5, limits=Limits(max_output_bytes=4096), workspace=tmp_path / "ws")
    assert (runner.executor.limits.timeout_s, runner.executor.limits.max_output_bytes) == (5, 4096)
    runner.executor.close()


@pytest.mark.slow  # creates a virtual environment
@pytest.mark.parametrize("kind", ADAPTERS)
def test_virtual_env_context_is_the_venv_the_blocks_run_in(kind, tmp_path):
    builder = venv.EnvBuilder(with_pip=False)
    builder.create(tmp_path / "env")
    context = builder.ensure_directories(tmp_path / "env")
    runner = adapter(kind, work_dir=tmp_path, virtual_env_context=context)
    try:
        result = run(kind, runner, "import sys; print(sys.prefix)")
    finally:
        runner.executor.close()
    assert result.exit_code == 0 and Path(result.output.strip()) == Path(context.env_dir), result.output


@pytest.mark.parametrize("kind", ADAPTERS)
def test_peer_options_without_a_meaning_here_name_execboxs_way(kind, tmp_path):
    owner = "AG2CodeExecutor" if kind == "ag2" else "AutoGenCodeExecutor"
    with pytest.raises(ConfigurationError, match=rf"{owner}\(backend='local'\).*'bind_dir'.*workspace="):
        adapter(kind, bind_dir=str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"'venv_path'.*environment=Venv\(path=\.\.\.\)"):
        adapter(kind, venv_path=str(tmp_path))
    with pytest.raises(ConfigurationError, match="work_dir= and workspace=: give one"):
        adapter(kind, work_dir=tmp_path, workspace=tmp_path)
    with pytest.raises(ConfigurationError, match="give the timeout once"):
        adapter(kind, timeout=3, limits=Limits(timeout_s=9))
    with pytest.raises(ConfigurationError, match="a number of seconds above 0"):
        adapter(kind, timeout="60")
    with pytest.raises(ConfigurationError, match=r"virtual_env_context=.*ensure_directories"):
        adapter(kind, virtual_env_context=str(tmp_path))
    with pytest.raises(ConfigurationError, match=r"cleanup_temp_files=1.*True or False"):
        adapter(kind, cleanup_temp_files=1)
    with pytest.raises(
        FileNotFoundError, match="does not exist"
    ):  # as the peers: only the last folder is made
        adapter(kind, work_dir=tmp_path / "missing" / "wd")


@pytest.mark.parametrize("kind", ADAPTERS)
def test_cleanup_removes_the_code_file_and_code_file_still_names_it(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path, cleanup_temp_files=True)
    try:
        result = run(kind, runner, "print('cleaned')")
        assert result.exit_code == 0 and result.output == "cleaned\n"
        assert result.code_file is not None and result.code_file.endswith(".py")
        assert Path(result.code_file).parent.is_dir() and not Path(result.code_file).exists()
        named = run(kind, runner, "# filename: mine.py\nprint('kept')")
        assert named.code_file == str(tmp_path.resolve() / "mine.py") and Path(named.code_file).is_file()
    finally:
        runner.executor.close()
    kept = adapter(kind, workspace=tmp_path / "ws", cleanup_temp_files=False)
    assert Path(run(kind, kept, "print(1)").code_file).is_file()
    kept.executor.close()


def test_autogen_cleanup_survives_dump_and_load(tmp_path):
    runner = AutoGenCodeExecutor(backend="local", work_dir=tmp_path, cleanup_temp_files=True)
    loaded = AutoGenCodeExecutor.load_component(runner.dump_component())
    assert loaded.dump_component().config["cleanup_temp_files"] is True
    result = run_autogen(loaded, "print(3)")
    assert result.output == "3\n" and result.code_file and not Path(result.code_file).exists()
    asyncio.run(loaded.stop())
    asyncio.run(runner.stop())


@pytest.mark.parametrize("kind", ADAPTERS)
def test_functions_module_and_the_prompt(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path, functions=[fns.circle], functions_module="tools")
    assert runner.functions_module == "tools"
    prompt = runner.format_functions_for_prompt()
    assert "`tools`" in prompt and "def circle(r: float) -> str:" in prompt
    bare = AG2CodeExecutor(LocalExecutor(workspace=tmp_path / "b"))
    assert bare.functions_module == "functions" and bare.format_functions_for_prompt() == ""
    runner.executor.close()
    bare.close()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_global_import_that_fails_is_refused_at_the_first_run_naming_it(kind, tmp_path):
    bad = fns.ag2_bad_import if kind == "ag2" else fns.bad_import
    runner = adapter(kind, work_dir=tmp_path, functions=[bad])  # made: AG2 checks at the first run too
    try:
        with pytest.raises(
            ValueError, match=r"execbox_surely_not_a_module.*\(global_imports of \w*bad_import\)"
        ):
            run(kind, runner, f"from {runner.functions_module} import {bad.func.__name__}")
    finally:
        runner.executor.close()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_restarting_a_stateless_backend_warns_as_the_peers_do(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path)
    with pytest.warns(UserWarning, match=r"keeps no state between blocks.*No action is taken"):
        if kind == "ag2":
            runner.restart()
        else:
            asyncio.run(runner.restart())
    assert run(kind, runner, "print('still usable')").output == "still usable\n"
    runner.executor.close()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_delete_tmp_files_is_the_docker_executors_name_for_cleanup(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path, delete_tmp_files=True)
    try:
        result = run(kind, runner, "print('gone')")
        assert result.exit_code == 0 and result.output == "gone\n"
        assert result.code_file is not None and not Path(result.code_file).exists()
    finally:
        runner.executor.close()
    with pytest.raises(ConfigurationError, match=r"delete_tmp_files='yes'\) takes True or False"):
        adapter(kind, delete_tmp_files="yes")
    with pytest.raises(ConfigurationError, match=r"cleanup_temp_files= and delete_tmp_files=.*give one"):
        adapter(kind, cleanup_temp_files=True, delete_tmp_files=True)


@pytest.mark.parametrize("kind", ADAPTERS)
def test_work_dir_none_is_a_temporary_workspace_removed_on_close(kind):
    runner = adapter(kind, work_dir=None)
    folder = runner.work_dir
    assert folder.is_dir() and runner.bind_dir == folder == runner.executor.workspace.path
    assert run(kind, runner, "print('in a temporary folder')").exit_code == 0
    runner.executor.close()
    assert not folder.exists()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_bind_dir_is_the_workspace_folder(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path / "wd")
    assert runner.bind_dir == (tmp_path / "wd").resolve()
    runner.executor.close()


@pytest.mark.parametrize("kind", ADAPTERS)
def test_the_docker_executors_extra_hosts_and_init_command_name_execboxs_way(kind):
    with pytest.raises(ConfigurationError, match=r"extra_hosts=\.\.\.\).*container_create_kwargs="):
        adapter(kind, extra_hosts={"example.com": "127.0.0.1"})
    with pytest.raises(ConfigurationError, match=r"init_command=\.\.\.\).*first block"):
        adapter(kind, init_command="echo hi")


@pytest.mark.parametrize("kind", ADAPTERS)
def test_a_filename_outside_the_workspace_says_so_in_the_peers_words(kind, tmp_path):
    runner = adapter(kind, work_dir=tmp_path / "wd")
    try:
        result = run(kind, runner, "# filename: /tmp/execbox-peer-escape.py\nprint('ran')")
        assert result.exit_code == 1, result.output
        assert "Filename is not in the workspace" in result.output and "ran" not in result.output
        assert not Path("/tmp/execbox-peer-escape.py").exists()
    finally:
        runner.executor.close()
