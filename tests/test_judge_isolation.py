"""What the judge and the builds it relies on hold apart (issue 39), on the
local and sandbox backends with real programs and compilers: the
workspace put back after each case (folders, links, modes, a workspace too
large to keep refused), a checker that does not build, a build's key that
covers the workspace's headers, and a compiler's memory bounded where no
cgroup holds it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from execbox import CodeBlock, ConfigurationError, Limits, LocalExecutor, SandboxExecutor
from execbox.backends.sandbox import find_bwrap
from tests.backends.test_languages import need_language
from tests.conftest import require

LIMITS = Limits(timeout_s=20)


def _sandbox(workspace: Path, limits: Limits = LIMITS, **options: object) -> SandboxExecutor:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=workspace, limits=limits, **options)  # type: ignore[arg-type]


def _make(backend: str, workspace: Path, limits: Limits = LIMITS, **options: object):  # type: ignore[no-untyped-def]
    if backend == "landlock":
        from execbox.backends.sandbox._landlock_tier import landlock_problem

        problem = landlock_problem()
        require("Landlock", problem is None, problem or "")
        return SandboxExecutor(workspace=workspace, limits=limits, isolation="landlock", **options)  # type: ignore[arg-type]
    if backend == "sandbox":
        return _sandbox(workspace, limits, **options)
    return LocalExecutor(workspace=workspace, limits=limits, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_each_case_finds_the_workspace_as_it_was(tmp_path, backend):
    ws = tmp_path / "ws"
    (ws / "given" / "inner").mkdir(parents=True)
    (ws / "given" / "inner" / "kept.txt").write_text("kept\n")
    (ws / "given" / "closed").mkdir(mode=0o750)
    os.symlink("inner/kept.txt", ws / "given" / "link")
    mtime = os.stat(ws / "given" / "inner" / "kept.txt").st_mtime_ns
    program = (
        "import os, shutil\n"
        "state = sorted(os.listdir('given')), open('given/link').read().strip()\n"
        "print(state)\n"
        "shutil.rmtree('given/inner')\n"
        "os.remove('given/link'); os.symlink('/etc/passwd', 'given/link')\n"
        "os.chmod('given/closed', 0o777)\n"
        "os.makedirs('new/deep'); open('new/deep/x', 'w').write('x')\n"
    )
    expected = str((["closed", "inner", "link"], "kept"))
    with _make(backend, ws) as ex:  # the given files the blocks' (as root, the jail's id's)
        ex.give_to_blocks(["given/inner/kept.txt", "given/closed", "given/link"])
        result = ex.judge(program, "python", [{"expected_stdout": expected}] * 3, stop_on_failure=False)
    assert [c.verdict for c in result.cases] == ["accepted"] * 3, [c.stdout + c.stderr for c in result.cases]
    assert sorted(os.listdir(ws)) == [".execbox", "given"]
    assert os.readlink(ws / "given" / "link") == "inner/kept.txt"
    assert (ws / "given" / "inner" / "kept.txt").read_text() == "kept\n"
    assert os.stat(ws / "given" / "inner" / "kept.txt").st_mtime_ns == mtime
    assert os.stat(ws / "given" / "closed").st_mode & 0o777 == 0o750


def test_a_workspace_too_large_to_keep_is_refused_by_name(tmp_path):
    from execbox.backends._judge_reset import MAX_KEPT_BYTES

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.bin").write_bytes(b"\0" * (MAX_KEPT_BYTES + 1))
    with LocalExecutor(workspace=ws, limits=LIMITS) as ex:
        with pytest.raises(ConfigurationError, match="fresh_workspace=False"):
            ex.judge("print(1)", "python", [{"expected_stdout": "1"}])
        assert ex.judge("print(1)", "python", [{"expected_stdout": "1"}], fresh_workspace=False).accepted


def test_a_checker_that_does_not_build_is_a_checker_error_named_before_any_case(tmp_path):
    need_language("c")
    with _sandbox(tmp_path / "ws") as ex:
        result = ex.judge(
            "print(42)",
            "python",
            [{"checker": {"code": "int main( {", "language": "c"}}] * 2,
            stop_on_failure=False,
        )
    assert [c.verdict for c in result.cases] == ["checker_error"] * 2
    assert "did not build" in result.cases[0].message and "error" in result.cases[0].message


@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_a_changed_header_is_a_new_build(tmp_path, backend):
    """The source is the same; the header it includes from the workspace is
    not: the build's key covers it (it hashed the source alone)."""
    need_language("c")
    source = '#include <stdio.h>\n#include "../../../value.h"\nint main(void) { printf("%d\\n", VALUE); }\n'
    with _make(backend, tmp_path / "ws") as ex:
        header = Path(ex.workspace.path) / "value.h"
        header.write_text("#define VALUE 1\n")
        assert ex.run(CodeBlock("c", source)).stdout == "1\n"
        header.write_text("#define VALUE 2\n")
        os.utime(header, ns=(1, 1))  # another time than the first's, whatever the clock's grain
        assert ex.run(CodeBlock("c", source)).stdout == "2\n"


@pytest.mark.parametrize("backend", ["local", "sandbox", "landlock"])
def test_a_compilers_memory_is_bounded_without_a_cgroup(tmp_path, backend):
    """``#include "/dev/zero"``: the preprocessor reads without end; under
    a 256 MB limit it must run out of memory there, not grow until the
    compile timeout (it grew past 1.5 GiB)."""
    need_language("c")
    limits = Limits(timeout_s=20, memory_mb=256, compile_timeout_s=20)
    options = {"cgroups": False} if backend != "local" else {}
    with _make(backend, tmp_path / "ws", limits, **options) as ex:
        block = ex.run(CodeBlock("c", '#include "/dev/zero"\nint main(void) { return 0; }\n')).blocks[0]
    assert block.status == "compile_error"
    assert block.error is not None and block.error.name != "CompileTimeout", block.output
    assert "memory" in block.output, block.output
