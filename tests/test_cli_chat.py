"""``execbox chat`` end to end: the CLI against the scripted model server,
code run on real backends."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from fake_llm import FakeModel

BROKEN = "```python\nimport statistics\nprint(statistics.mean(DATA))\n```"
FIXED = "```python\nimport statistics\nDATA = [3, 5, 10]\nprint('mean', statistics.mean(DATA))\n```"
DONE = "The mean is 6. TERMINATE"


def _chat(base_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    return subprocess.run([sys.executable, "-m", "execbox.cli", "chat", "Find the mean of 3, 5 and 10.",
                           "--base-url", base_url, *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=env)


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
    assert "Stopped: the person typed exit" in done.stdout
    assert done.returncode == 1


def test_max_turns_and_an_unreachable_server():
    with FakeModel([BROKEN, BROKEN]) as server:
        done = _chat(server.base_url, "--backend", "local", "--auto", "--max-turns", "1")
    assert "Stopped: max_turns=1 reached after 1 writer turn(s)" in done.stdout
    gone = _chat("http://127.0.0.1:9/v1", "--backend", "local", "--auto")
    assert gone.returncode == 2
    assert "execbox: error: cannot reach the model server at http://127.0.0.1:9/v1" in gone.stderr
