"""``SandboxExecutor(stateful=True)``: one Python session in the jail whose
state persists between blocks, shows values as a notebook does, survives a
timeout, and says when it had to start again (real bubblewrap)."""

from __future__ import annotations

import time
from contextlib import ExitStack

import pytest

from execbox import (
    BackendUnavailableError,
    CodeBlock,
    ConfigurationError,
    Limits,
    SandboxExecutor,
    Workspace,
    executor_from_config,
)
from execbox.backends.sandbox import find_bwrap
from tests._fake_gpus import fake_gpu_host
from tests.conftest import require


def py(code: str) -> CodeBlock:
    return CodeBlock("python", code)


@pytest.fixture(params=["pid-namespace", "gpu"])
def session(request, tmp_path):
    """A session in a unit with a PID namespace of its own, and a GPU
    session's (none: the driver refuses a nested one; ``tests/_fake_gpus``)."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with ExitStack() as stack:
        gpus = None
        if request.param == "gpu":
            stack.enter_context(fake_gpu_host())
            gpus = "all"
        executor = SandboxExecutor(
            workspace=Workspace(tmp_path / "ws"), limits=Limits(timeout_s=4), stateful=True, gpus=gpus
        )
        try:
            executor.start()
        except BackendUnavailableError as exc:
            require("the sandbox's namespaces tier", False, str(exc))
        yield executor
        executor.close()


def test_globals_and_imports_persist_and_the_last_expression_is_shown(session):
    assert session.capabilities.stateful
    assert session.run(py("import math\nx = 41")).output == ""
    result = session.run(py("x += 1\nmath.floor(x + 0.5)"))
    assert result.ok, result.output
    assert result.output == "42\n"
    assert [(d.mime_type, d.data) for d in result.blocks[0].displays] == [("text/plain", "42")]
    assert session.run(py("None")).output == ""  # None is not shown, as in a notebook
    assert session.run(py("print(_ + 1)")).output == "43\n"  # the last value shown


@pytest.mark.as_user
def test_a_large_block_runs(session):
    code = "values = [\n" + "".join(f"    {i},  # é\n" for i in range(40_000)) + "]\nlen(values)"
    result = session.run(py(code))
    assert result.ok and result.output == "40000\n", result.output[-300:]


@pytest.mark.as_user
def test_shell_blocks_run_in_the_same_jail_and_tmp_persists(session):
    assert session.run(py("open('/tmp/note', 'w').write('kept')")).ok
    result = session.run(CodeBlock("sh", "cat /tmp/note; echo; exit 3"))
    assert result.exit_code == 3 and result.output == "kept\n"
    assert session.run(py("print(open('/tmp/note').read())")).output == "kept\n"


def test_errors_are_data_and_keep_the_state(session):
    session.run(py("y = 'still here'"))
    result = session.run(py("1/0"))
    assert result.exit_code == 1 and result.error is not None and result.error.name == "ZeroDivisionError"
    result = session.run(py("import sys; sys.exit(3)"))
    assert result.exit_code == 3
    assert session.run(py("y")).output == "'still here'\n"


@pytest.mark.as_user
def test_a_timeout_interrupts_and_keeps_the_state(session):
    session.run(py("z = 7"))
    result = session.run(py("import time\nprint('before', flush=True)\ntime.sleep(60)\nprint('after')"))
    assert result.exit_code == 124 and result.timed_out
    assert result.error is not None and result.error.name == "Timeout"
    assert "before" in result.output and "after" not in result.stdout
    assert "Limits.timeout_s" in result.output
    assert "state (variables, imports) is kept" in result.output
    assert session.run(py("z")).output == "7\n"


@pytest.mark.as_user
def test_an_interrupt_that_does_not_take_restarts_the_session(session):
    code = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nw = 1\nwhile True:\n    pass"
    result = session.run(py(code))
    assert result.exit_code == 124
    assert "restarted" in result.output and "lost" in result.output
    after = session.run(py("print('w' in globals())"))
    assert after.output == "False\n"


@pytest.mark.as_user
@pytest.mark.parametrize(
    "death, how",
    [
        ("import os\nos._exit(4)", "exit code 4"),
        ("import ctypes\nctypes.string_at(0)", "signal 11"),
        ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "signal 9"),
    ],
)
def test_a_dead_interpreter_is_replaced_and_the_result_says_so(session, death, how):
    session.run(py("v = 1"))
    result = session.run(py(death))
    assert result.exit_code != 0
    assert result.error is not None and result.error.name == "SessionDied"
    assert how in result.output and "lost" in result.output
    after = session.run(py("print('v' in globals())"))
    assert after.ok and after.output == "False\n"


def test_a_death_between_blocks_is_told_by_the_next_block(session):
    code = (
        "import os, threading, time\nthreading.Thread(target=lambda: (time.sleep(0.3), os._exit(9))).start()"
    )
    assert session.run(py(code)).ok
    time.sleep(2)  # not a timed assertion: a wait for the thread to end the session
    result = session.run(py("print('fresh')"))
    assert result.ok
    assert "had died since the last block (exit code 9)" in result.output
    assert result.output.endswith("fresh\n")


def test_memory_limit_kills_or_fails_the_allocation_and_the_session_goes_on(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with SandboxExecutor(
        workspace=Workspace(tmp_path / "ws"), limits=Limits(timeout_s=20, memory_mb=128), stateful=True
    ) as executor:
        result = executor.run(py("big = bytearray(512 << 20)"))
        assert result.exit_code != 0
        assert result.error is not None and result.error.name == "MemoryLimit", result.output
        assert "Limits.memory_mb" in result.output
        assert executor.run(py("print('alive')")).output == "alive\n"


def test_processes_a_block_started_end_with_it_and_the_state_stays(session):
    started = session.run(py("import subprocess\np = subprocess.Popen(['sleep', '300'])\npid = p.pid"))
    assert started.ok, started.output
    result = session.run(
        py("import os\ntry:\n    os.kill(pid, 0)\nexcept ProcessLookupError:\n    print('gone')")
    )  # killed after its block, and reaped
    assert result.output == "gone\n"


def test_matplotlib_figures_become_png_displays(session):
    pytest.importorskip("matplotlib")
    # importing matplotlib took over the session's 4 s on a busy machine: this test is not about time
    session.limits = session.limits.replace(timeout_s=60)
    result = session.run(py("import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.title('t')"))
    assert result.ok, result.output
    images = [d for d in result.blocks[0].displays if d.mime_type == "image/png"]
    assert len(images) == 1 and images[0].path is not None
    assert (session.workspace.path / images[0].path).read_bytes().startswith(b"\x89PNG")
    shown = session.run(py("plt.plot([3, 1])\nplt.show()\nprint('after show')"))
    assert [d.mime_type for d in shown.blocks[0].displays] == ["image/png"]
    assert "after show" in shown.output
    assert not session.run(py("print(plt.get_fignums())")).blocks[0].displays  # none left open


def test_a_planted_outputs_link_is_not_written_through(session, tmp_path):
    pytest.importorskip("matplotlib")
    outside = tmp_path / "outside"
    outside.mkdir()
    session.limits = session.limits.replace(
        timeout_s=60
    )  # matplotlib's import on a busy machine: not about time
    result = session.run(
        py(
            f"import os\nos.symlink({str(outside)!r}, 'outputs')\n"
            "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint('drawn')"
        )
    )
    assert "drawn" in result.output and "image/png not saved" in result.output, result.output
    assert not result.blocks[0].displays
    assert list(outside.iterdir()) == []
    assert session.run(py("print(6 * 7)")).output == "42\n"


def test_a_block_holding_every_descriptor_does_not_wedge_the_session(session):
    result = session.run(
        py(
            "import os\nfds = []\ntry:\n    while True:\n        fds.append(os.open('/dev/null', 0))\n"
            "except OSError as exc:\n    print('errno', exc.errno)"
        )
    )
    assert "errno 24" in result.output
    after = session.run(py("print(6 * 7)"))
    assert after.ok and after.output == "42\n"  # descriptors kept aside for the session: the state stays
    assert session.run(py("print(len(fds) > 100)")).output == "True\n"


def test_executors_do_not_see_each_others_state_or_tmp(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with (
        SandboxExecutor(workspace=Workspace(tmp_path / "a"), stateful=True) as a,
        SandboxExecutor(workspace=Workspace(tmp_path / "b"), stateful=True) as b,
    ):
        a.run(py("secret = 'a'\nopen('/tmp/a-was-here', 'w').write('1')"))
        result = b.run(py("import os\nprint('secret' in globals(), os.path.exists('/tmp/a-was-here'))"))
        assert result.output == "False False\n"
    with SandboxExecutor(workspace=Workspace(tmp_path / "c"), stateful=True) as c:
        assert c.run(py("import os\nprint(os.path.exists('/tmp/a-was-here'))")).output == "False\n"


def test_restart_starts_a_fresh_session(session):
    session.run(py("r = 1\nopen('/tmp/r', 'w').write('1')"))
    session.restart()
    result = session.run(py("import os\nprint('r' in globals(), os.path.exists('/tmp/r'))"))
    assert result.output == "False False\n"


def test_options_that_cannot_keep_a_session_are_refused():
    with pytest.raises(ConfigurationError, match="pool=False"):
        SandboxExecutor(stateful=True, pool=False)
    with pytest.raises(ConfigurationError, match="isolation"):
        SandboxExecutor(stateful=True, isolation="landlock")


def test_the_option_survives_the_config_round_trip():
    executor = SandboxExecutor(stateful=True)
    try:
        again = executor_from_config(executor.to_config())
        assert again.stateful and again.capabilities.stateful
        again.close()
    finally:
        executor.close()
