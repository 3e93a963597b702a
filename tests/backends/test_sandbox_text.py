"""A pooled block runs from its text: with ``keep_code_files=False`` its
code file is never written (no write and no removal on the host per
block), yet the block sees the same ``__file__``, its tracebacks show its
lines and ``inspect`` finds its source; a block too large to send whole is
written and read as before."""

from __future__ import annotations

import pytest

from execbox import BackendUnavailableError, CodeBlock, Limits, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

BLOCK = (
    "import inspect, os\n"
    "def f():\n"
    "    raise ValueError('boom')\n"
    "print(os.path.exists(__file__), __file__.endswith('.py'), os.path.basename(os.path.dirname(__file__)))\n"
    "print(inspect.getsource(f).splitlines()[1].strip())\n"
    "f()\n"
)


@pytest.fixture(params=["pool", "stateful"])
def make(request, tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    made: list[SandboxExecutor] = []

    def make(keep: bool) -> SandboxExecutor:
        executor = SandboxExecutor(
            workspace=Workspace(tmp_path / f"ws-{keep}"),
            limits=Limits(timeout_s=20),
            stateful=request.param == "stateful",
            keep_code_files=keep,
        )
        made.append(executor)
        try:
            executor.start()
        except BackendUnavailableError as exc:
            require("the sandbox's namespaces tier", False, str(exc))
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.mark.parametrize("keep", [False, True])
def test_a_block_runs_from_its_text_with_its_lines_in_tracebacks(make, keep):
    executor = make(keep)
    result = executor.run(CodeBlock("python", BLOCK))
    assert result.error is not None and result.error.name == "ValueError", result.output
    # the file exists only where it is kept; the block names it either way
    assert result.stdout.startswith(f"{keep} True code\nraise ValueError('boom')\n"), result.output
    assert "line 3, in f\n    raise ValueError('boom')\n" in result.output, result.output
    assert "zygote" not in result.output and "run_file" not in result.output, result.output
    code_dir = executor.workspace.path / ".execbox" / "code"
    files = sorted(p.name for p in code_dir.iterdir()) if code_dir.exists() else []
    if keep:
        assert len(files) == 1 and result.code_files == (f".execbox/code/{files[0]}",), (files, result)
    else:
        assert files == [] and result.code_files == (), (files, result)


def test_a_block_too_large_to_send_is_written_read_and_removed(make):
    executor = make(False)
    # ~200 KB of text, past what a request carries whole
    code = (
        "".join(f"x{i} = {i}  # é\n" for i in range(12_000))
        + "import os\nprint(os.path.exists(__file__), x11999)\n"
    )
    result = executor.run(CodeBlock("python", code))
    assert result.ok and result.output == "True 11999\n", result.output[-300:]
    code_dir = executor.workspace.path / ".execbox" / "code"
    assert not (code_dir.exists() and any(code_dir.iterdir()))


def test_a_session_sends_the_text_it_did_not_write_whatever_the_workspaces_path(tmp_path):
    # the executor and the session decide alike whether a text goes whole: a long workspace path
    # (escaped in JSON six times over) once made the session drop a text never written to a file
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    deep = tmp_path.joinpath(*["é" * 120] * 6) / "ws"
    with SandboxExecutor(
        workspace=Workspace(deep), limits=Limits(timeout_s=20), stateful=True, keep_code_files=False
    ) as executor:
        # a text just under the bound, which with the path made a request past it
        code = "x = 1\n" + "#" * 61_300 + "\nimport os\nprint(os.path.exists(__file__), x)\n"
        result = executor.run(CodeBlock("python", code))
    assert result.ok and result.output == "False 1\n", result.output[-300:]
