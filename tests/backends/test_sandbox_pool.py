"""The sandbox's warm pool: a block in a warm unit behaves exactly like the
same file run by a fresh interpreter, nothing leaks from one block to the
next, preload works, and the pool survives what happens to it."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from execbox import CodeBlock, ConfigurationError, Limits, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

# Each program runs as prog.py in the same workspace, pooled and one-shot;
# output, exit code and error must be identical.
PROGRAMS = {
    "main_and_file": "import sys\nprint(__name__, __file__, sys.argv, sys.path[0])",
    "traceback": "def f():\n    raise ValueError('boom')\nf()",
    "syntax_error": "x = (1,\nprint(x",
    "sys_exit_int": "import sys\nprint('before')\nsys.exit(7)",
    "sys_exit_str": "import sys\nsys.exit('bad things')",
    "sys_exit_none": "raise SystemExit",
    "atexit": "import atexit\natexit.register(lambda: print('bye'))\nprint('hi')",
    "stdin_closed": "import sys\nprint(repr(sys.stdin.read()))",
    "non_daemon_thread": "import threading, time\n"
    "threading.Thread(target=lambda: (time.sleep(0.2), print('thread done'))).start()\n"
    "print('main done')",
    "stderr_and_stdout": "import sys\nprint('out')\nprint('err', file=sys.stderr)",
    "keyboard_interrupt": "raise KeyboardInterrupt",
    "signal_self": "import os, signal\nos.kill(os.getpid(), signal.SIGTERM)",
    "os_exit": "import os\nprint('x', flush=True)\nos._exit(5)",
    "doc_and_builtins": "'''doc'''\nprint(__doc__, type(__builtins__).__name__, __spec__, __cached__)",
    "globals_clean": "print(sorted(k for k in globals() if not k.startswith('__')))",
}


def _need_bwrap() -> None:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    _need_bwrap()
    workspace = Workspace(tmp_path_factory.mktemp("pair") / "ws")
    limits = Limits(timeout_s=20)
    with (
        SandboxExecutor(workspace=workspace, limits=limits, pool=True) as pooled,
        SandboxExecutor(workspace=workspace, limits=limits, pool=False) as oneshot,
    ):
        yield pooled, oneshot
    workspace.close()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_warm_block_behaves_like_a_file_run(pair, name):
    pooled, oneshot = pair
    block = CodeBlock("python", PROGRAMS[name], filename="prog.py")
    cold, warm = oneshot.run(block), pooled.run(block)
    assert (warm.output, warm.exit_code, warm.error) == (cold.output, cold.exit_code, cold.error)


def test_expected_file_run_details(pair):
    pooled, _ = pair
    main = pooled.run(CodeBlock("python", PROGRAMS["main_and_file"], filename="prog.py"))
    path = str(pooled.workspace.path / "prog.py")
    assert main.output == f"__main__ {path} ['prog.py'] {pooled.workspace.path}\n"
    assert pooled.run(CodeBlock("python", PROGRAMS["sys_exit_int"])).exit_code == 7
    tb = pooled.run(CodeBlock("python", PROGRAMS["traceback"], filename="prog.py"))
    assert tb.error is not None and tb.error.name == "ValueError"
    assert f'File "{path}", line 3, in <module>' in tb.output
    assert "zygote" not in tb.output
    assert pooled.run(CodeBlock("python", PROGRAMS["atexit"])).output == "hi\nbye\n"
    assert pooled.run(CodeBlock("python", PROGRAMS["non_daemon_thread"])).output == "main done\nthread done\n"


def test_nothing_leaks_from_one_block_to_the_next(pair):
    pooled, _ = pair
    first = pooled.run(
        CodeBlock(
            "python",
            "import json, os\njson.leak = 1\nos.environ['LEAK'] = '1'\n"
            "open('/tmp/leak', 'w').write('x')\nimport decimal\nprint('ok')",
        )
    )
    assert first.output == "ok\n"
    second = pooled.run(
        CodeBlock(
            "python",
            "import json, os, sys\n"
            "print(hasattr(json, 'leak'), 'LEAK' in os.environ, "
            "os.path.exists('/tmp/leak'), 'decimal' in sys.modules)",
        )
    )
    assert second.output == "False False False False\n"


def test_random_numbers_differ_between_blocks(pair):
    pooled, _ = pair
    code = "import random, os\nprint(random.random(), os.urandom(8).hex())"
    outputs = {pooled.run(CodeBlock("python", code)).output for _ in range(4)}
    assert len(outputs) == 4


def test_preload_imports_once_in_the_zygote(tmp_path):
    _need_bwrap()
    code = "import sys\nprint('decimal' in sys.modules, 'fractions' in sys.modules)"
    with SandboxExecutor(workspace=tmp_path / "ws", preload=["decimal"]) as ex:
        assert ex.run(CodeBlock("python", code)).output == "True False\n"


def test_a_preload_that_fails_names_the_module(tmp_path):
    _need_bwrap()
    with pytest.raises(ConfigurationError, match="no_such_module_xyz"):
        with SandboxExecutor(workspace=tmp_path / "ws", preload=["no_such_module_xyz"]):
            pass


def test_preload_needs_the_pool():
    with pytest.raises(ConfigurationError, match="pool"):
        SandboxExecutor(pool=False, preload=["json"])


def test_started_from_a_short_lived_thread(tmp_path):
    """bwrap --die-with-parent watches the thread that started it: the pool
    must outlive a worker thread that started the executor."""
    _need_bwrap()
    ex = SandboxExecutor(workspace=tmp_path / "ws")
    try:
        worker = threading.Thread(target=ex.start)
        worker.start()
        worker.join()
        results = [ex.run(CodeBlock("python", f"print({i})")) for i in range(6)]
        assert [r.output for r in results] == [f"{i}\n" for i in range(6)]
    finally:
        ex.close()


def test_the_pool_comes_back_when_its_zygote_dies(tmp_path):
    _need_bwrap()
    with SandboxExecutor(workspace=tmp_path / "ws") as ex:
        assert ex.run(CodeBlock("python", "print(1)")).output == "1\n"
        zygote = ex._zygote
        assert zygote is not None and zygote._proc is not None
        os.kill(zygote._proc.pid, signal.SIGKILL)  # the jail, the zygote and every unit go
        zygote._proc.wait()
        outputs = [ex.run(CodeBlock("python", "print(2)")).output for _ in range(3)]
        # units made before the crash are gone with it: those blocks fail, then the pool restarts
        assert outputs[-1] == "2\n"


def test_timeouts_and_kills_do_not_poison_the_pool(tmp_path):
    _need_bwrap()
    with SandboxExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=1)) as ex:
        slow = ex.run(CodeBlock("python", "import time\nprint('start', flush=True)\ntime.sleep(60)"))
        assert slow.timed_out and slow.exit_code == 124 and slow.output.startswith("start\n")
        assert ex.run(CodeBlock("python", "import os\nos.kill(os.getpid(), 9)")).exit_code == 137
        assert ex.run(CodeBlock("python", "print('fine')")).output == "fine\n"


def test_shell_blocks_run_in_units_too(tmp_path):
    _need_bwrap()
    with SandboxExecutor(workspace=tmp_path / "ws") as ex:
        result = ex.run(CodeBlock("sh", "echo $$; id -u; kill -TERM $$; echo not reached"))
    assert result.output.split()[1] == "65534"
    assert result.exit_code == 143
