"""The command line's own words: --version, one spelling of --memory, an
unknown option said as such with the closest known one, and limits named
as the options that set them (not as the library's ``Limits`` fields)."""

from __future__ import annotations

import json

import pytest

from execbox._version import __version__
from tests.cli.test_cli import execbox


def test_version():
    done = execbox("--version")
    assert (done.returncode, done.stdout.strip()) == (0, f"execbox {__version__}"), done.stderr


@pytest.mark.parametrize(
    ("args", "typo", "meant"),
    [
        (["run", "reply.md", "--timout", "5"], "--timout", "--timeout"),
        (
            ["exec", "--langauge", "c", "-c", "x"],
            "--langauge",
            "--language",
        ),  # argparse: "-c not allowed with FILE"
        (["exec", "-c", "x", "--netwrk"], "--netwrk", "--network"),
        (
            ["exec", "--mem", "1G", "-c", "x"],
            "--mem",
            "--memory",
        ),  # argparse: ambiguous, naming the hidden one
        (["judge", "p.py", "--cases", "c.json", "--memroy", "1G"], "--memroy", "--memory"),
    ],
)
def test_an_unknown_option_is_said_so_with_the_closest_one(args, typo, meant):
    done = execbox(*args)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.endswith(f"error: unknown option {typo}: did you mean {meant}?"), done.stderr
    assert "--memory-mb" not in done.stderr  # the hidden spelling is never offered


def test_judge_takes_memory_as_run_does_and_the_old_spelling_hidden(tmp_path):
    source = tmp_path / "add.py"
    source.write_text("print(sum(map(int, input().split())))\n")
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"stdin": "1 2", "expected_stdout": "3"}]))
    helped = execbox("judge", "--help").stdout
    assert "--memory SIZE" in helped and "--memory-mb" not in helped
    for given in (["--memory", "256M"], ["--memory", "1G"], ["--memory-mb", "256"]):
        done = execbox("judge", str(source), "--cases", str(cases), "--backend", "local", *given)
        assert done.returncode == 0, done.stdout + done.stderr
    done = execbox("judge", str(source), "--cases", str(cases), "--memory", "lots")
    assert done.returncode == 2 and "argument --memory: 'lots' is not a size" in done.stderr


def test_limit_messages_name_the_options(tmp_path):
    slow = "import time\ntime.sleep(30)\n"
    for mode in ("--live", "--no-live"):
        done = execbox("exec", "-c", slow, "--timeout", "1", "--backend", "local", mode)
        assert done.returncode == 124, done.stdout + done.stderr
        assert "Timeout after 1 s (--timeout 1)" in done.stdout, done.stdout
        assert "Limits." not in done.stdout
    done = execbox(
        "run", "-", "--timeout", "1", "--backend", "local", "--no-live", stdin=f"```python\n{slow}```\n"
    )
    assert "(--timeout 1)" in done.stdout and "Limits." not in done.stdout, done.stdout
    # an error of the command: the option, not the field
    done = execbox("exec", "-c", "print(1)", "--max-output-bytes", "100", "--backend", "local")
    assert done.returncode == 2 and done.stderr.startswith("execbox: error: --max-output-bytes must be")
    # the judge's verdicts too
    source = tmp_path / "slow.py"
    source.write_text(slow)
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"stdin": "", "expected_stdout": ""}]))
    done = execbox("judge", str(source), "--cases", str(cases), "--timeout", "1", "--backend", "local")
    assert done.returncode == 1 and "(--timeout 1)" in done.stdout and "Limits." not in done.stdout, (
        done.stdout
    )
    # --json is the library's result, as the API gives it
    done = execbox("exec", "-c", slow, "--timeout", "1", "--backend", "local", "--json")
    assert "Limits.timeout_s=1" in json.loads(done.stdout)["output"]


@pytest.mark.parametrize("mode", ["--live", "--no-live"])
@pytest.mark.parametrize("command", ["exec", "run"])
def test_what_a_block_printed_is_never_reworded(command, mode):
    # only execbox's own notes name the options: a block's text is shown as it printed it
    said = "import time\nprint('my own (Limits.timeout_s=1) words')\ntime.sleep(30)\n"
    args = ("-c", said) if command == "exec" else ("-",)
    stdin = None if command == "exec" else f"```python\n{said}```\n"
    done = execbox(command, *args, "--timeout", "1", "--backend", "local", mode, stdin=stdin)
    assert done.returncode == 124, done.stdout + done.stderr
    assert "my own (Limits.timeout_s=1) words" in done.stdout, done.stdout
    assert "Timeout after 1 s (--timeout 1)" in done.stdout, done.stdout
