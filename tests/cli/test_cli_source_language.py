"""``execbox exec FILE`` and ``execbox judge FILE`` take the language from
FILE's suffix; one they do not run is a usage error naming -l/--language."""

from __future__ import annotations

import json
import shutil

import pytest

from execbox._languages import find_language
from tests.cli.test_cli import execbox

HELLO = {
    "c": ("hello.c", '#include <stdio.h>\nint main(void){ puts("hello from the model"); return 0; }\n'),
    "go": ("hello.go", 'package main\nimport "fmt"\nfunc main(){ fmt.Println("hello from the model") }\n'),
    "rust": ("hello.rs", 'fn main(){ println!("hello from the model"); }\n'),
    "java": (
        "hello.java",
        'public class Main { public static void main(String[] a){ System.out.println("hello from the model"); } }\n',
    ),
    "typescript": ("hello.ts", 'const who: string = "the model";\nconsole.log(`hello from ${who}`);\n'),
}


def _need(language: str) -> None:
    lang = find_language(language)
    assert lang is not None
    missing = [p for p in lang.programs() if shutil.which(p) is None]
    if missing:
        pytest.skip(f"{language} needs {', '.join(missing)} ({lang.install_hint})")


@pytest.mark.parametrize("language", sorted(HELLO))
def test_exec_runs_a_file_in_the_language_of_its_suffix(tmp_path, language):
    _need(language)
    name, code = HELLO[language]
    source = tmp_path / name
    source.write_text(code)
    # the local backend: toolchains wherever PATH has them (a rustup rustc too)
    done = execbox("exec", str(source), "--backend", "local", "--timeout", "120")
    assert (done.returncode, done.stdout) == (0, "hello from the model\n"), done.stdout + done.stderr
    assert "SyntaxError" not in done.stdout + done.stderr


def test_exec_still_runs_python_without_a_suffix_and_from_c(tmp_path):
    script = tmp_path / "script"
    script.write_text("print('py', 6 * 7)\n")
    assert execbox("exec", str(script), "--backend", "local").stdout == "py 42\n"
    assert execbox("exec", "-c", "print(7)", "--backend", "local").stdout == "7\n"
    assert execbox("exec", "-", "--backend", "local", stdin="print(8)\n").stdout == "8\n"


@pytest.mark.parametrize("command", ["exec", "judge"])
@pytest.mark.parametrize("name", ["prog.txt", "prog.unknown", "notes.md"])
def test_a_suffix_execbox_does_not_run_asks_for_the_language(tmp_path, command, name):
    source = tmp_path / name
    source.write_text("print(1)\n")
    cases = tmp_path / "cases.json"
    cases.write_text(json.dumps([{"stdin": "", "expected_stdout": "1"}]))
    extra = ["--cases", str(cases)] if command == "judge" else []
    done = execbox(command, str(source), *extra, "--backend", "local")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stdout == ""  # nothing ran: no verdict, no output
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "-l/--language" in message and name in message
    assert "python (.py" in message and "c (.c)" in message  # the languages served, with their suffixes
    # -l decides: the same file runs
    done = execbox(command, str(source), *extra, "--backend", "local", "-l", "python")
    assert done.returncode == 0, done.stdout + done.stderr
