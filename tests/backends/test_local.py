"""What the local backend adds to the contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import warnings

import pytest

from execbox import (
    CodeBlock,
    ConfigurationError,
    EnvironmentSetupError,
    Limits,
    LocalExecutor,
    SystemPython,
    UnenforcedLimitWarning,
    Venv,
)
from tests.conftest import require

PY = "python"


@pytest.fixture
def local(tmp_path):
    with LocalExecutor(workspace=tmp_path / "ws") as executor:
        yield executor


def test_host_secrets_are_not_passed_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret")
    code = CodeBlock(PY, "import os; print(os.environ.get('OPENAI_API_KEY'))")
    with LocalExecutor(workspace=tmp_path) as ex:
        assert ex.run(code).output == "None\n"
    with LocalExecutor(workspace=tmp_path, inherit_env=True) as ex:
        assert ex.run(code).output == "sk-host-secret\n"
    with LocalExecutor(workspace=tmp_path, env={"OPENAI_API_KEY": "given"}) as ex:
        assert ex.run(code).output == "given\n"


def test_child_environment_is_minimal(local):
    names = local.run(CodeBlock(PY, "import os; print(sorted(os.environ))")).output
    allowed = {
        "HOME",
        "LANG",
        "LC_ALL",
        "TZ",
        "TMPDIR",
        "USER",
        "LOGNAME",
        "PATH",
        "PYTHONUNBUFFERED",
        "PYTHONIOENCODING",
        "MPLBACKEND",
        "EXECBOX_RUN_TOKEN",
        "LC_CTYPE",
    }
    assert set(eval(names)) <= allowed


def test_python_and_pip_in_shell_blocks_are_the_environments(local):
    python = SystemPython().prepare()
    out = local.run(CodeBlock("sh", "command -v python3")).output.strip()
    assert os.path.dirname(out) == os.path.dirname(python)


def test_bad_env_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="env must map str to str"):
        LocalExecutor(env={"A": 1})  # type: ignore[dict-item]


def test_functions_are_importable_and_described(tmp_path):
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    def shout(text: str) -> str:
        return text.upper() + "!"

    with LocalExecutor(workspace=tmp_path, functions=[add, shout, "import math\nPI = math.pi"]) as ex:
        result = ex.run(
            CodeBlock(PY, "from functions import add, shout, PI\nprint(add(2, 3), shout('hi'), round(PI, 2))")
        )
        assert result.output == "5 HI! 3.14\n"
        prompt = ex.functions_prompt
    assert "from functions import add" in prompt
    assert "def add(a: int, b: int) -> int:" in prompt and "Add two numbers." in prompt
    assert result.files == ()


def test_lambda_functions_are_refused():
    with pytest.raises(ConfigurationError, match="lambda"):
        LocalExecutor(functions=[lambda x: x])


def test_functions_module_none_is_the_default_and_a_bad_name_says_what_to_give(tmp_path):
    # (was: AttributeError: 'NoneType' object has no attribute 'isidentifier')
    def add(a: int, b: int) -> int:
        return a + b

    with LocalExecutor(workspace=tmp_path, functions=[add], functions_module=None) as ex:
        assert ex.run(CodeBlock(PY, "from functions import add\nprint(add(2, 3))")).output == "5\n"
    for bad in (3, "no-dashes", "class"):
        with pytest.raises(ConfigurationError) as caught:
            LocalExecutor(functions=[add], functions_module=bad)  # type: ignore[arg-type]
        assert f"functions_module={bad!r} is not a module name" in str(caught.value)
        assert "'functions' (the default)" in str(caught.value)


def test_memory_limit_stops_a_memory_bomb(tmp_path):
    with LocalExecutor(workspace=tmp_path, limits=Limits(memory_mb=200)) as ex:
        result = ex.run(CodeBlock(PY, "x = bytearray(1024 * 1024 * 1024)\nprint('allocated')"))
    assert result.exit_code != 0
    assert "allocated" not in result.output
    assert result.error is not None and result.error.name == "MemoryError"


def test_unenforceable_limits_warn_and_capabilities_tell(tmp_path):
    with pytest.warns(UnenforcedLimitWarning, match="max_processes, network"):
        with LocalExecutor(workspace=tmp_path, limits=Limits(max_processes=10, network=False)) as ex:
            caps = ex.capabilities
    assert not caps.isolated
    assert "max_processes" not in caps.enforced and "timeout_s" in caps.enforced
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        LocalExecutor(workspace=tmp_path).start()


def test_execution_policies(tmp_path):
    with LocalExecutor(workspace=tmp_path, execution_policies={"sh": "refuse", "javascript": False}) as ex:
        refused = ex.run(CodeBlock("sh", "echo no"))
        saved = ex.run(CodeBlock("js", "console.log(1)", "app.js"))
    assert refused.exit_code == 1 and refused.error.name == "RefusedLanguage"
    assert "execution_policies" in refused.output
    assert saved.blocks[0].status == "saved" and (tmp_path / "app.js").exists()
    with pytest.raises(ConfigurationError, match="unknown language"):
        LocalExecutor(execution_policies={"klingon": "execute"})
    with pytest.raises(ConfigurationError, match="nothing runs html"):
        LocalExecutor(execution_policies={"html": "execute"})


def test_silence_pip_quiets_installs(local):
    result = local.run(CodeBlock("sh", 'pip() { echo "pip $*"; }\npip install requests'))
    assert result.output == "pip install -qqq requests\n"


def test_javascript_runs_with_node(local):
    require("node", shutil.which("node") is not None, "apt-get install nodejs")
    assert local.run(CodeBlock("js", "console.log(6 * 7)")).output == "42\n"


def test_missing_interpreter_names_the_fix(local):
    if shutil.which("pwsh"):
        pytest.skip("pwsh is installed here; the missing-interpreter message cannot show")
    result = local.run(CodeBlock("powershell", "Write-Output 1"))
    assert result.exit_code != 0
    assert "pwsh is not installed" in result.output and "PowerShell" in result.output


def test_system_python_by_name_resolves_to_real_interpreter():
    real = SystemPython("python3").prepare()
    assert os.path.isabs(real)
    with open(real, "rb") as handle:
        assert handle.read(4) == b"\x7fELF"
    with pytest.raises(EnvironmentSetupError, match="not found"):
        SystemPython("no-such-python-9").prepare()


def test_huge_output_does_not_grow_the_host():
    # The peak is read from VmHWM after resetting it: Linux carries ru_maxrss across exec, so a
    # child forked from a big pytest process would otherwise start at pytest's size.
    script = (
        "import execbox, re\n"
        "open('/proc/self/clear_refs', 'w').write('5')\n"
        "with execbox.LocalExecutor() as ex:\n"
        "    r = ex.run(execbox.CodeBlock('python', 'import sys\\nchunk = \"x\" * 1048575 + \"\\\\n\"\\n'\n"
        "        'for _ in range(1024): sys.stdout.write(chunk)'))\n"
        "peak = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1))\n"
        "print(r.truncated, len(r.output), peak // 1024)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    truncated, length, peak_mb = out.stdout.split()
    assert truncated == "True"
    assert int(length) < 2 * 1024 * 1024
    assert int(peak_mb) < 100, f"host peaked at {peak_mb} MB for 1 GiB of output"


@pytest.mark.slow
@pytest.mark.parametrize("installer", ["pip", "uv"])
def test_venv_with_packages(tmp_path, monkeypatch, installer):
    if installer == "uv":
        from execbox.environments._interpreters import find_uv

        require("uv", find_uv() is not None, "pip install uv (part of the dev extra)")
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    steps: list[str] = []
    env = Venv(packages=["six==1.16.0"], installer=installer)
    with LocalExecutor(workspace=tmp_path / "ws", environment=env, on_progress=steps.append) as ex:
        result = ex.run(
            [
                CodeBlock(PY, "import six, sys; print(six.__version__, sys.prefix)"),
                CodeBlock("sh", "python -c 'import six; print(six.__file__)'"),
            ]
        )
    assert result.exit_code == 0, result.output
    assert result.output.startswith("1.16.0 " + str(env.path))
    assert str(env.path) in result.blocks[1].output
    assert any("installing" in s for s in steps)
    # the same spec is reused, not rebuilt
    again: list[str] = []
    Venv(packages=["six==1.16.0"], installer=installer).prepare(again.append)
    assert again == []


@pytest.mark.slow
def test_venv_bad_package_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    env = Venv(packages=["this-package-does-not-exist-execbox-zz==0.0.1"], installer="pip")
    with pytest.raises(EnvironmentSetupError, match="check the package names"):
        env.prepare()


def test_code_files_are_kept_unless_asked(tmp_path):
    with LocalExecutor(workspace=tmp_path / "ws") as kept:
        result = kept.run(CodeBlock("python", "print(1)"))
        assert (kept.workspace.path / result.code_files[0]).is_file()
    with LocalExecutor(workspace=tmp_path / "ws2", keep_code_files=False) as dropped:
        result = dropped.run([CodeBlock("python", "print(1)"), CodeBlock("python", "1/0")])
        assert result.code_files == () and result.error.name == "ZeroDivisionError"
        assert not any((dropped.workspace.path / ".execbox" / "code").iterdir())


def test_timeout_says_timeout(local):
    local.limits = Limits(timeout_s=0.5)
    result = local.run(CodeBlock("python", "import time; time.sleep(5)"))
    assert result.timed_out and "Timeout" in result.output and "Limits.timeout_s" in result.output
