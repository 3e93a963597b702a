"""The README is kept true by running it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from execbox import extract_code_blocks

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_starts_with_the_two_commands():
    first = extract_code_blocks(README)[0]
    commands = [line.split("#")[0].strip() for line in first.code.splitlines()]
    assert commands == ["./dev.sh run", "./dev.sh test"]
    assert README.index("```") < README.index("\n## ")


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "./dev.sh test" in ci and "EXECBOX_REQUIRE=all" in ci


def test_python_examples_run(tmp_path):
    examples = [b for b in extract_code_blocks(README) if b.language == "python"]
    assert examples
    for block in examples:
        done = subprocess.run([sys.executable, "-c", block.code], cwd=tmp_path, capture_output=True,
                              text=True, timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert done.returncode == 0, done.stderr
        assert "hello from the model" in done.stdout


def test_cli_help_lists_the_documented_commands():
    done = subprocess.run([sys.executable, "-m", "execbox.cli", "--help"], capture_output=True, text=True)
    for command in ("run", "exec", "languages", "chat", "mcp", "papers", "explore"):
        assert command in done.stdout
        assert f"execbox {command}" in README
