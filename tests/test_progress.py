"""Progress of long work (``execbox._progress``): the steps a caller's
``on_progress`` gets, in order; the default reporter's spinner on a real
terminal (a pty) and its log lines elsewhere; silence with False."""

from __future__ import annotations

import importlib.util
import io
import logging
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import execbox
from execbox import CodeBlock, ConfigurationError, JupyterExecutor, LocalExecutor, ProgressReporter, Venv
from execbox._progress import reporting
from execbox.tools import PythonTool
from tests.conftest import require

CREATE = "creating virtual environment at "


def _run_on_a_pty(code: str, env: dict[str, str], timeout: float = 120) -> tuple[int, str]:
    """Run ``code`` in a fresh interpreter whose stderr is a pseudo-terminal;
    its exit status and everything the terminal got."""
    leader, follower = os.openpty()
    child = subprocess.Popen(
        [sys.executable, "-c", code],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = bytearray()
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([leader], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(leader, 65536)
                except OSError:  # EIO: the child closed its end
                    break
                if not chunk:
                    break
                seen += chunk
            elif child.poll() is not None:
                break
        code_ = child.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        os.close(leader)
    return code_, seen.decode("utf-8", "replace")


def _child_env(tmp_path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(EXECBOX_CACHE_DIR=str(tmp_path / "cache"), TERM="xterm-256color", COLUMNS="200")
    source = str(Path(execbox.__file__).parents[1])  # this execbox, installed or not
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [source, env.get("PYTHONPATH")]))
    for name in ("NO_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "FORCE_COLOR"):
        env.pop(name, None)
    return env


def test_the_spinner_shows_a_venv_being_made_on_a_terminal_and_goes(tmp_path):
    """A real venv creation by an executor given no on_progress: the
    terminal gets the step in a live display, which is gone before the
    program goes on."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from execbox import LocalExecutor, Venv
        with LocalExecutor(workspace={str(tmp_path / "ws")!r},
                           environment=Venv()) as ex:
            ex.start()
            print("STARTED", file=sys.stderr, flush=True)
            time.sleep(0.5)  # a spinner still running would draw again here
        """
    )
    status, seen = _run_on_a_pty(code, _child_env(tmp_path))
    assert status == 0, seen
    before, marker, after = seen.partition("STARTED")
    assert marker, seen
    assert CREATE in before and "\x1b[" in before, seen  # the step, drawn by a live display
    assert "environment ready" in before, seen
    assert "INFO" not in seen and "execbox:" not in seen  # no log or plain lines on a terminal
    assert CREATE not in after and "environment ready" not in after, after  # the spinner stopped


def test_the_cli_reporter_keeps_a_line_per_step_on_a_terminal(tmp_path):
    code = textwrap.dedent(
        f"""
        from execbox import ProgressReporter, Venv
        Venv(path={str(tmp_path / "v")!r}).prepare(ProgressReporter(lines=True))
        """
    )
    status, seen = _run_on_a_pty(code, _child_env(tmp_path))
    assert status == 0, seen
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", seen)
    assert f"• {CREATE}{tmp_path / 'v'}\r\n" in lines and "• environment ready\r\n" in lines, seen


def test_without_a_terminal_the_steps_are_log_lines(tmp_path, monkeypatch, caplog):
    piped = io.StringIO()  # not a terminal: nothing may be drawn on it
    monkeypatch.setattr(sys, "stderr", piped)
    with caplog.at_level(logging.INFO, logger="execbox"):
        Venv(path=tmp_path / "v").prepare()
    steps = [r.getMessage() for r in caplog.records if r.name == "execbox"]
    assert steps == [f"{CREATE}{tmp_path / 'v'}", "environment ready"]
    assert piped.getvalue() == ""


def test_a_subprocess_without_a_terminal_logs_its_steps(tmp_path):
    code = textwrap.dedent(
        f"""
        import logging
        from execbox import Venv
        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
        Venv(path={str(tmp_path / "v")!r}).prepare()
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_child_env(tmp_path), timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert f"execbox INFO {CREATE}{tmp_path / 'v'}\n" in done.stderr
    assert "execbox INFO environment ready\n" in done.stderr
    assert "\x1b[" not in done.stderr


def test_on_progress_gets_the_steps_in_order(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    steps: list[str] = []
    env = Venv()
    with LocalExecutor(workspace=tmp_path / "ws", environment=env, on_progress=steps.append) as ex:
        ex.start()
    assert steps == [f"{CREATE}{env.path}", "environment ready"]
    again: list[str] = []
    with LocalExecutor(workspace=tmp_path / "ws2", environment=env, on_progress=again.append) as ex:
        ex.start()
    assert again == []  # cached: no long work, no steps


def test_python_tool_reports_its_libraries_install(tmp_path, monkeypatch):
    monkeypatch.setenv("EXECBOX_CACHE_DIR", str(tmp_path / "cache"))
    steps: list[str] = []
    with PythonTool(backend="local", environment=Venv(), on_progress=steps.append) as tool:
        reply = tool("import six; print(six.__version__)", libraries=["six==1.16.0"])
    assert reply["success"], reply
    assert reply["stdout"] == "1.16.0\n"
    made = [s for s in steps if s.startswith(CREATE)]
    assert len(made) == 2, steps  # the tool's venv, then the one with six
    assert steps.index("installing six==1.16.0") > steps.index(made[1]), steps
    assert steps[-1] == "environment ready"


def test_false_shows_nothing(tmp_path, monkeypatch, caplog):
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stderr", piped)
    with caplog.at_level(logging.DEBUG, logger="execbox"):
        Venv(path=tmp_path / "v").prepare(False)
    assert (tmp_path / "v" / "bin" / "python").exists()
    assert [r for r in caplog.records if r.name == "execbox"] == [] and piped.getvalue() == ""


def test_nested_work_shares_the_outer_reporter(monkeypatch):
    reporter = ProgressReporter(stream=io.StringIO())
    with reporting(reporter) as outer:
        with reporting(outer) as inner:
            assert inner is reporter
        assert reporter._depth == 1  # the inner work's end did not close the outer
    assert reporter._depth == 0


@pytest.mark.parametrize("bad", ["yes", 3, ["print"]])
def test_a_bad_on_progress_is_refused_by_name(tmp_path, bad):
    with pytest.raises(ConfigurationError, match=r"LocalExecutor\(on_progress=.*give a callable"):
        LocalExecutor(workspace=tmp_path / "ws", on_progress=bad)
    with pytest.raises(ConfigurationError, match=r"PythonTool\(on_progress="):
        PythonTool(backend="local", on_progress=bad)


def test_the_former_spelling_names_the_new_one(tmp_path):
    with pytest.raises(TypeError, match="use on_progress="):
        LocalExecutor(workspace=tmp_path / "ws", progress=print)


def test_a_jupyter_kernel_start_is_a_step(tmp_path):
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    steps: list[str] = []
    with JupyterExecutor(kernel="local", workspace=tmp_path / "ws", on_progress=steps.append) as ex:
        assert ex.run(CodeBlock("python", "print(6 * 7)")).output == "42\n"
    assert steps == ["starting a local Jupyter kernel"]
