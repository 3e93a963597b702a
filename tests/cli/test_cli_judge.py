"""``execbox judge`` and ``execbox exec --stdin``, as a user runs them."""

from __future__ import annotations

import json

from tests.cli.test_cli import execbox

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"


def test_exec_gives_the_program_its_stdin(tmp_path):
    given = tmp_path / "in.txt"
    given.write_text("20 22\n")
    done = execbox("exec", "-c", ADD, "--stdin", str(given))
    assert (done.returncode, done.stdout) == (0, "42\n"), done.stderr


def test_judge_prints_a_verdict_per_case_and_exits_by_it(tmp_path):
    source = tmp_path / "add.py"
    source.write_text(ADD)
    cases = tmp_path / "cases.jsonl"
    lines = [
        {"stdin": "1 2", "expected_stdout": "3"},
        {"stdin": "2 2", "expected_stdout": "5", "name": "off"},
    ]
    cases.write_text("\n".join(json.dumps(line) for line in lines))
    done = execbox("judge", str(source), "--cases", str(cases), "--all")
    assert done.returncode == 1, done.stderr
    assert "case 1: accepted" in done.stdout
    assert "off: wrong_answer" in done.stdout and "expected '5', got '4'" in done.stdout
    assert done.stdout.rstrip().endswith("wrong_answer: 1/2 passed")
    good = tmp_path / "good.json"
    good.write_text(json.dumps(lines[:1]))
    done = execbox("judge", str(source), "--cases", str(good), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["verdict"] == "accepted"


def test_judge_names_what_is_wrong(tmp_path):
    source = tmp_path / "prog.unknown"
    source.write_text("x")
    cases = tmp_path / "c.json"
    cases.write_text("[{}]")
    done = execbox("judge", str(source), "--cases", str(cases))
    assert done.returncode == 2 and "--language" in done.stderr


def test_judge_gives_each_case_a_fresh_workspace_unless_shared(tmp_path):
    source = tmp_path / "count.py"
    source.write_text(
        "import os\nprint(len(set(os.listdir('.')) - {'.execbox'}))\nopen(f'left-{os.getpid()}', 'w').close()\n"
    )
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"expected_stdout": "0"}] * 2))
    fresh = execbox("judge", str(source), "--cases", str(cases), "--backend", "local", "--json")
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    shared = execbox("judge", str(source), "--cases", str(cases), "--backend", "local", "--shared-workspace")
    assert shared.returncode == 1 and "expected '0', got '1'" in shared.stdout, shared.stdout + shared.stderr
