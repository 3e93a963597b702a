"""The Jupyter backend with a real local kernel: state, rich outputs,
timeouts that keep state, a dying kernel, shell blocks, clean shutdown."""

from __future__ import annotations

import importlib.util

import pytest

from execbox import CodeBlock, JupyterExecutor, Limits
from tests.conftest import process_alive, require, wait_dead


@pytest.fixture
def jupyter(tmp_path):
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    with JupyterExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=5)) as executor:
        yield executor


def py(code: str) -> CodeBlock:
    return CodeBlock("python", code)


def test_state_is_kept_between_blocks(jupyter):
    assert jupyter.run(py("data = [1, 2, 3]\nimport json")).exit_code == 0
    assert jupyter.run(py("print(json.dumps(sum(data)))")).output == "6\n"
    assert jupyter.capabilities.stateful


def test_a_plot_comes_back_as_a_png_file(jupyter):
    code = "import matplotlib.pyplot as plt\nplt.plot([1, 3, 2])\nplt.show()"
    result = jupyter.run(py(code))
    assert result.exit_code == 0, result.output
    pngs = [d for d in result.displays if d.mime_type == "image/png"]
    assert len(pngs) == 1 and pngs[0].path in result.files
    data = (jupyter.workspace.path / pngs[0].path).read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n")


def test_values_html_and_json_displays(jupyter):
    code = ("from IPython.display import HTML, JSON, display\n"
            "display(HTML('<b>hi</b>'))\ndisplay(JSON({'a': 1}))\n40 + 2")
    result = jupyter.run(py(code))
    kinds = [d.mime_type for d in result.displays]
    assert "text/html" in kinds and "application/json" in kinds
    html = next(d for d in result.displays if d.mime_type == "text/html")
    assert (jupyter.workspace.path / html.path).read_text() == "<b>hi</b>"
    assert result.output.endswith("42\n")


def test_errors_are_data_without_ansi_codes(jupyter):
    result = jupyter.run(py("def f():\n    raise KeyError('k')\nf()"))
    assert result.exit_code == 1
    assert result.error is not None and result.error.name == "KeyError"
    assert "\x1b[" not in result.error.traceback and "\x1b[" not in result.output
    assert "raise KeyError" in result.error.traceback


def test_a_timeout_interrupts_and_keeps_state(jupyter):
    jupyter.run(py("kept = 'yes'"))
    result = jupyter.run(py("import time\nprint('started', flush=True)\ntime.sleep(60)"))
    assert result.timed_out and result.exit_code == 124
    assert result.output.startswith("started\n") and "state (variables, imports) is kept" in result.output
    assert jupyter.run(py("print(kept)")).output == "yes\n"


def test_a_dead_kernel_is_reported_restarted_and_the_next_block_works(jupyter):
    jupyter.run(py("lost = 1"))
    old = jupyter._kernel.pid
    result = jupyter.run(py("import os\nos._exit(3)"))
    assert result.exit_code == 137 and result.error is not None and result.error.name == "KernelDied"
    assert "restarted" in result.output and "lost" in result.output
    assert wait_dead([old]) == []
    after = jupyter.run(py("print('alive', 'lost' in globals())"))
    assert after.output == "alive False\n"


def test_shell_blocks_run_beside_the_kernel(jupyter):
    result = jupyter.run(CodeBlock("sh", "echo out; echo err >&2; pwd; exit 5"))
    assert result.exit_code == 5
    assert result.stdout == f"out\n{jupyter.workspace.path}\n" and result.stderr == "err\n"


def test_restart_clears_state(jupyter):
    jupyter.run(py("gone = 1"))
    jupyter.restart()
    assert jupyter.run(py("print('gone' in globals())")).output == "False\n"


def test_close_leaves_no_kernel(tmp_path):
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    ex = JupyterExecutor(workspace=tmp_path / "ws")
    ex.run(py("import subprocess; p = subprocess.Popen(['sleep', '60'])"))
    pid = ex._kernel.pid
    assert pid is not None and process_alive(pid)
    ex.close()
    assert wait_dead([pid]) == []
