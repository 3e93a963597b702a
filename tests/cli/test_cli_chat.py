"""``execbox chat`` end to end: the CLI against the scripted model server,
code run on real backends."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from fake_anthropic import FakeAnthropic
from fake_llm import FakeModel

from tests.conftest import require_namespaces

BROKEN = "```python\nimport statistics\nprint(statistics.mean(DATA))\n```"
FIXED = "```python\nimport statistics\nDATA = [3, 5, 10]\nprint('mean', statistics.mean(DATA))\n```"
DONE = "The mean is 6. TERMINATE"


def _chat(base_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "execbox.cli",
            "chat",
            "Find the mean of 3, 5 and 10.",
            "--base-url",
            base_url,
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_auto_chat_runs_fails_retries_and_terminates():
    with FakeModel([BROKEN, FIXED, DONE]) as server:
        done = _chat(server.base_url, "--auto", "--model", "gpt-4o-mini")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "── writer" in out and "── executor" in out
    assert "exitcode: 1 (execution failed)" in out and "NameError: name 'DATA' is not defined" in out
    assert "exitcode: 0 (execution succeeded)\nmean 6" in out
    assert "Stopped: the writer said TERMINATE after 3 writer turn(s)" in out
    assert "Summary: The mean is 6." in out
    assert re.search(r"Model usage: \d+ prompt \+ \d+ completion tokens, \$0\.000\d+", out)
    assert "code runs on sandbox" in done.stderr  # the default backend


def test_interactive_chat_takes_guidance_and_exit():
    with FakeModel([BROKEN, FIXED, DONE]) as server:
        done = _chat(server.base_url, "--backend", "local", stdin="Define DATA first.\n\nexit\n")
        guided = [m["content"] for m in server.requests[1]["messages"]]
    assert "Define DATA first." in guided
    assert "Enter runs the code" in done.stderr
    assert "exitcode: 0 (execution succeeded)\nmean 6" in done.stdout
    assert "NameError" not in done.stdout  # the broken block never ran: the person guided instead
    assert "Human input: Define DATA first. | (Enter) | exit" in done.stdout
    # exit typed after the writer's TERMINATE ends a finished task: exit status 0
    assert "Stopped: the writer said TERMINATE; the person typed exit" in done.stdout
    assert done.returncode == 0, done.stderr


def test_max_turns_and_an_unreachable_server():
    with FakeModel([BROKEN, BROKEN]) as server:
        done = _chat(server.base_url, "--backend", "local", "--auto", "--max-turns", "1")
    assert "Stopped: max_turns=1 reached after 1 writer turn(s)" in done.stdout
    gone = _chat("http://127.0.0.1:9/v1", "--backend", "local", "--auto")
    assert gone.returncode == 2
    assert "execbox: error: cannot reach the model server at http://127.0.0.1:9/v1" in gone.stderr


def _tool_chat(
    base_url: str, *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "execbox.cli",
            "chat",
            "What is 6 times 7?",
            "--tools",
            "--base-url",
            base_url,
            *args,
        ],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **(env or {})},
    )


def test_tools_mode_prints_each_call_its_result_and_the_cost():
    script = [
        {"tool_calls": [{"name": "python", "arguments": {"code": "print(6 * 7)"}}]},
        {"tool_calls": [{"name": "write_file", "arguments": {"path": "answer.txt", "content": "42"}}]},
        "6 times 7 is 42.",
    ]
    with FakeModel(script) as server:
        done = _tool_chat(server.base_url, "--auto", "--model", "gpt-4o-mini")
        offered = [t["function"]["name"] for t in server.requests[0]["tools"]]
    assert done.returncode == 0, done.stderr
    assert offered == ["python", "shell", "list_files", "read_file", "write_file"]
    out = done.stdout
    assert "── call python" in out and "print(6 * 7)" in out
    assert "── result python" in out and '"stdout": "42\\n"' in out
    assert "── call write_file" in out and "Wrote 2 bytes to answer.txt" in out
    assert "6 times 7 is 42." in out
    assert re.search(r"Model usage: \d+ prompt \+ \d+ completion tokens, \$0\.0", out)
    assert "tools run on sandbox" in done.stderr
    kept = re.search(
        r"^execbox: the files are in (\S+) \(kept; --workdir DIR to choose where\)$", done.stderr, re.M
    )
    assert kept is not None, done.stderr  # the file the model wrote outlives the command
    try:
        assert f"tools run on sandbox in {kept[1]}" in done.stderr
        assert (Path(kept[1]) / "answer.txt").read_text() == "42"
    finally:
        shutil.rmtree(kept[1], ignore_errors=True)


def test_tools_mode_with_anthropic_asks_before_each_call():
    script = [
        {"tool_calls": [{"name": "shell", "arguments": {"command": "rm -rf ./*"}}]},
        {"tool_calls": [{"name": "python", "arguments": {"code": "print(42)"}}]},
        "It is 42.",
    ]
    with FakeAnthropic(script) as server:
        done = _tool_chat(
            server.base_url,
            "--model",
            "claude-haiku-4-5",
            "--backend",
            "local",
            stdin="do not delete anything\n\n",
            env={"ANTHROPIC_API_KEY": "k"},
        )
        refused = server.requests[1]["messages"][-1]["content"][0]
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("Run shell? Enter runs it") == 1 and "Run python?" in done.stderr
    assert refused["type"] == "tool_result"
    assert refused["content"] == "The user refused to run this: do not delete anything. Nothing was run."
    assert "(refused: do not delete anything)" in done.stdout and '"stdout": "42\\n"' in done.stdout


def test_chat_takes_the_limit_options_and_keeps_the_files_left():
    require_namespaces()  # --network: the namespaces tier (the Landlock tier refuses it)
    with FakeModel([]) as server:
        block = (  # the network on: an interface of the block's own with a way out (never the host's)
            "```python\nimport resource, socket\n"
            "print('interfaces', sorted(n for _, n in socket.if_nameindex()))\n"
            "print('nproc', resource.getrlimit(resource.RLIMIT_NPROC)[0])\n"
            "open('mean.txt', 'w').write('6')\n```"
        )
        server.add(block, DONE)
        done = _chat(server.base_url, "--auto", "--network", "--max-processes", "29", "--memory", "1G")
    assert done.returncode == 0, done.stderr
    assert "exitcode: 0 (execution succeeded)\ninterfaces ['lo', 'tap0']\nnproc 29" in done.stdout
    kept = re.search(
        r"^execbox: the files are in (\S+) \(kept; --workdir DIR to choose where\)$", done.stderr, re.M
    )
    assert kept is not None, done.stderr
    try:
        assert f"code runs on sandbox in {kept[1]}" in done.stderr
        assert (Path(kept[1]) / "mean.txt").read_text() == "6"
    finally:
        shutil.rmtree(kept[1], ignore_errors=True)
