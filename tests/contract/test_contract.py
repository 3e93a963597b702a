"""The executor contract, run against every backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid

import pytest

from execbox import CodeBlock, ExecutorClosedError, Limits, NoCodeBlocksError
from tests.conftest import marked, wait_dead

PY = "python"


def py(code: str, filename: str | None = None) -> CodeBlock:
    return CodeBlock(PY, code, filename)


def test_output_and_exit_code(executor):
    result = executor.run(py("print('hello')"))
    assert result.exit_code == 0
    assert result.output == "hello\n"
    assert result.stdout == "hello\n"
    assert result.stderr == ""
    assert result.error is None
    assert result.blocks[0].status == "ok"


def test_stdout_and_stderr_interleave_in_order(executor):
    # Two pipes: the order is the order of arrival, exact for writes that are
    # not microseconds apart (documented on ExecutionResult.output).
    code = (
        "import sys, time\nprint('a')\ntime.sleep(0.05)\nprint('b', file=sys.stderr)\n"
        "time.sleep(0.05)\nprint('c')\n"
    )
    result = executor.run(py(code))
    assert result.output == "a\nb\nc\n"
    assert result.stdout == "a\nc\n"
    assert result.stderr == "b\n"


@pytest.mark.parametrize(
    "block, code",
    [
        (CodeBlock("python", "import sys; sys.exit(3)"), 3),
        (CodeBlock("sh", "echo out; exit 5"), 5),
        (CodeBlock("bash", "false"), 1),
    ],
)
def test_exit_codes(executor, block, code):
    result = executor.run(block)
    assert result.exit_code == code
    assert result.blocks[0].status == "failed"


def test_user_exception_is_data(executor):
    result = executor.run(py("print('start')\n1/0"))
    assert result.exit_code == 1
    assert result.error is not None
    assert result.error.name == "ZeroDivisionError"
    assert result.error.value == "division by zero"
    assert "Traceback" in result.error.traceback
    assert "start" in result.output


def test_blocks_run_in_order_and_stop_at_first_failure(executor):
    blocks = [
        py("open('one.txt', 'w').write('1')\nprint('first')"),
        CodeBlock("sh", "cat one.txt; echo; exit 7"),
        py("open('three.txt', 'w').write('3')\nprint('third')"),
    ]
    result = executor.run(blocks)
    assert result.exit_code == 7
    assert [b.status for b in result.blocks] == ["ok", "failed"]
    assert result.output == "first\n1\n"
    assert not (executor.workspace.path / "three.txt").exists()


def test_empty_block_list_raises_value_error(executor):
    with pytest.raises(ValueError, match="no code blocks"):
        executor.run([])
    assert issubclass(NoCodeBlocksError, ValueError)


def test_timeout_keeps_partial_output(make_executor):
    executor = make_executor(Limits(timeout_s=1))
    started = time.monotonic()
    result = executor.run(py("import time\nprint('before', flush=True)\ntime.sleep(60)\nprint('after')"))
    assert time.monotonic() - started < 10
    assert result.exit_code == 124
    assert result.timed_out
    assert result.blocks[0].status == "timeout"
    assert "before" in result.output
    assert "after" not in result.stdout
    assert "Limits.timeout_s" in result.output
    assert "Timeout" in result.output  # the word AG2's agents and prompts look for
    assert result.error is not None and result.error.name == "Timeout"
    assert "Timeout" in result.error.value


def test_keep_code_files_false_removes_the_code_files_execbox_wrote(executor):
    executor.keep_code_files = False  # as made with keep_code_files=False (AG2's cleanup_temp_files)
    result = executor.run([py("print(1)"), py("print(2)", "kept.py")])
    assert result.ok, result.output
    assert result.code_files == ("kept.py",)  # a named block is the user's file
    assert result.blocks[0].code_file is None and result.blocks[1].code_file == "kept.py"
    code_dir = executor.workspace.path / ".execbox" / "code"
    assert not (code_dir.exists() and any(code_dir.iterdir()))
    assert (executor.workspace.path / "kept.py").read_text() == "print(2)"


DESCENDANTS = r"""
import os, subprocess, sys, time
MARK = "{marker}"
sleeper = [sys.executable, "-c", "import sys, time; open(sys.argv[1], 'w').write('up'); time.sleep(300)"]
# a plain grandchild
subprocess.Popen(sleeper + ["grandchild.up", MARK])
# a daemon: double fork + setsid, out of our process group
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, sleeper + ["daemon.up", MARK])
    os._exit(0)
# a grandchild that keeps stdout open
subprocess.Popen(sleeper + ["holder.up", MARK], stdout=sys.stdout)
for name in ("grandchild.up", "daemon.up", "holder.up"):
    while not os.path.exists(name):
        time.sleep(0.01)
print("spawned", flush=True)
"""


@pytest.mark.parametrize("ending", ["timeout", "exit"])
def test_no_descendant_survives(make_executor, ending):
    executor = make_executor(Limits(timeout_s=5))
    marker = f"execbox-contract-{uuid.uuid4().hex}"
    tail = "time.sleep(300)\n" if ending == "timeout" else ""
    result = executor.run(py(DESCENDANTS.replace("{marker}", marker) + tail))
    assert "spawned" in result.output
    for name in ("grandchild.up", "daemon.up", "holder.up"):
        assert (executor.workspace.path / name).exists(), name
    assert result.exit_code == (124 if ending == "timeout" else 0)
    assert wait_dead(marked(marker)) == []
    assert result.duration_s < 12


def test_unknown_language_is_an_in_band_failure(executor):
    result = executor.run(CodeBlock("cobol", "DISPLAY 'HI'."))
    assert result.exit_code != 0
    assert result.blocks[0].status == "unsupported"
    assert result.error is not None and result.error.name == "UnsupportedLanguage"
    assert "cobol" in result.output and "python" in result.output


def test_save_only_language_is_written_not_run(executor):
    result = executor.run(CodeBlock("html", "<h1>hi</h1>", "page.html"))
    assert result.exit_code == 0
    assert result.blocks[0].status == "saved"
    assert (executor.workspace.path / "page.html").read_text() == "<h1>hi</h1>"
    assert "page.html" in result.output


@pytest.mark.parametrize("filename", ["../escape.py", "/tmp/execbox-escape.py", "a/../../escape.py"])
def test_filename_traversal_is_refused(executor, filename):
    outside = executor.workspace.path.parent / "escape.py"
    result = executor.run(py("print('ran')", filename))
    assert result.exit_code != 0
    assert result.error is not None and result.error.name == "PathEscape"
    assert "ran" not in result.output
    assert "Filename is not in the workspace" in result.output  # AG2's and AutoGen's words
    assert not outside.exists()
    assert not os.path.exists("/tmp/execbox-escape.py")


def test_filename_through_symlink_out_is_refused(executor, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (executor.workspace.path / "link").symlink_to(outside)
    result = executor.run(py("print('ran')", "link/x.py"))
    assert not (outside / "x.py").exists()
    if executor.name == "remote":  # a link is never sent to the server (where it points is this machine's)
        assert "link/x.py" in executor.mirror_skipped  # ran there; not brought back through the link
        return
    if executor.name == "ray":  # nor to a node
        assert "link/x.py" in executor.files_skipped
        return
    assert result.error is not None and result.error.name == "PathEscape"


def test_filename_inside_workspace_is_used(executor):
    result = executor.run(py("print(__file__)", "pkg/tool.py"))
    assert result.exit_code == 0
    assert (executor.workspace.path / "pkg" / "tool.py").exists()
    assert result.code_files == ("pkg/tool.py",)
    assert "tool.py" in result.output


def test_big_output_is_cut_with_a_marker(make_executor):
    limit = 64 * 1024
    executor = make_executor(Limits(timeout_s=60, max_output_bytes=limit))
    code = "import sys\nfor i in range(20000):\n    print('line', i)\nprint('THE END')\n"
    result = executor.run(py(code))
    assert result.exit_code == 0
    assert result.truncated
    assert "Limits.max_output_bytes" in result.output
    assert len(result.output.encode()) < limit + 1024
    assert result.output.startswith("line 0\n")
    assert "THE END" in result.output  # the tail is kept


def test_files_created_are_reported(executor):
    result = executor.run(
        py(
            "open('out.txt', 'w').write('x')\nimport os\nos.makedirs('d', exist_ok=True)\n"
            "open('d/inner.csv', 'w').write('a,b')"
        )
    )
    assert set(result.files) == {"out.txt", "d/inner.csv"}
    assert all(not f.startswith(".execbox") for f in result.files)
    assert len(result.code_files) == 1


def test_concurrent_callers_get_their_own_output(executor):
    outputs: dict[int, str] = {}

    def call(i: int) -> None:
        outputs[i] = executor.run(py(f"print({i} * 1000 + 7)")).output

    threads = [threading.Thread(target=call, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outputs == {i: f"{i * 1000 + 7}\n" for i in range(16)}


def test_identical_blocks_at_once_do_not_collide(executor):
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(executor.run(py("print('same')")))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [r.output for r in results] == ["same\n"] * 8
    assert len({r.code_files for r in results}) == 8


def test_async_run_matches_sync(executor):
    block = py("import sys\nprint('x')\nprint('y', file=sys.stderr)\nsys.exit(2)")
    sync = executor.run(block)
    asynchronous = asyncio.run(executor.arun(block))
    for field in ("exit_code", "stdout", "stderr", "error", "timed_out", "files"):
        assert getattr(sync, field) == getattr(asynchronous, field), field
    if executor.name in ("docker", "jupyter"):
        # the engine copies stdout and stderr in two goroutines; ipykernel
        # flushes each stream from its own buffer on its own schedule (seen
        # under load in CI: stderr's line first). Writes to the two streams
        # microseconds apart can arrive in either order: the same characters
        assert sorted(sync.output) == sorted(asynchronous.output)
    else:
        assert sync.output == asynchronous.output


def test_async_cancel_kills_the_block(executor):
    if getattr(executor, "runtime", None) == "runsc":
        pytest.skip("gVisor's processes are not visible from the host; the same path is checked under runc")
    marker = f"execbox-cancel-{uuid.uuid4().hex}"
    code = (
        "import os, sys, time\nopen('up', 'w').write('1')\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])"
    )

    async def scenario() -> float:
        task = asyncio.create_task(executor.arun(py(code)))
        for _ in range(200):
            if marked(marker):
                break
            await asyncio.sleep(0.05)
        assert marked(marker), "the block never started"
        started = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return time.monotonic() - started

    elapsed = asyncio.run(scenario())
    assert wait_dead(marked(marker)) == []
    # the cancel ends the run, not the block's 300 s; a bound far from both, not a speed test
    # (a Jupyter kernel is interrupted, given a grace, then replaced: seconds on a loaded machine)
    assert elapsed < 60
    assert executor.run(py("print('still works')")).output == "still works\n"


def test_restart_stops_running_blocks_and_stays_usable(executor):
    holder: list = []
    thread = threading.Thread(target=lambda: holder.append(executor.run(py("import time; time.sleep(300)"))))
    thread.start()
    time.sleep(1.0)
    executor.restart()
    thread.join(timeout=10)
    assert holder and holder[0].exit_code != 0
    assert executor.run(py("print(1)")).output == "1\n"


def test_closed_executor_refuses_runs(executor):
    executor.close()
    with pytest.raises(ExecutorClosedError, match="closed"):
        executor.run(py("print(1)"))


def test_stdin_is_closed(executor):
    result = executor.run(py("import sys\nprint(repr(sys.stdin.read()))"))
    assert result.output == "''\n"


def test_state_between_blocks_is_what_the_capabilities_say(executor):
    # a stateful backend (Jupyter, the sandbox's session) keeps a block's variables for the next
    assert executor.run(py("kept = 1")).ok
    result = executor.run(py("print('kept' in globals())"))
    assert result.output == f"{executor.capabilities.stateful}\n"
