"""Node.js, a JVM and Go under ``--memory`` where no memory cgroup holds it
(the local backend; the sandbox without cgroups, in both tiers): RLIMIT_AS
stopped them at start (Node.js "killed by signal 5", exit 133; the JVM
"Could not reserve enough space"; the judge: runtime_error for every case).
RLIMIT_DATA holds the limit for them, and a block past it ends with a note
naming the limit: ``--memory`` on the command line, Limits.memory_mb in
the library."""

from __future__ import annotations

import json
import shutil

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor
from execbox._languages import find_language
from execbox.backends.sandbox._landlock_tier import landlock_problem
from execbox.jail._jail import find_bwrap
from tests.cli.test_cli import execbox
from tests.conftest import require

HELLO = {
    "javascript": ("hello.js", 'console.log("hello from the model");\n'),
    "java": (
        "Main.java",
        'public class Main { public static void main(String[] a){ System.out.println("hello from the model"); } }\n',
    ),
    "go": ("hello.go", 'package main\nimport "fmt"\nfunc main(){ fmt.Println("hello from the model") }\n'),
    "typescript": ("hello.ts", 'const who: string = "the model";\nconsole.log(`hello from ${who}`);\n'),
}
# far past 256 MB: V8's heap, then its array buffers
NODE_HOG = "const kept = [];\nfor (;;) kept.push(new Array(1e6).fill(1.5));\n"
BUFFER_HOG = "const kept = [];\nfor (;;) kept.push(Buffer.alloc(1 << 24, 1));\n"


def _need(language: str) -> None:
    lang = find_language(language)
    assert lang is not None
    missing = [p for p in lang.programs() if shutil.which(p) is None]
    require(language, not missing, f"apt-get install {lang.package}")


@pytest.mark.parametrize("language", sorted(HELLO))
def test_a_runtime_that_reserves_address_space_starts_under_memory(tmp_path, language):
    _need(language)
    name, code = HELLO[language]
    source = tmp_path / name
    source.write_text(code)
    done = execbox("exec", str(source), "--backend", "local", "--memory", "256M", "--timeout", "120")
    assert (done.returncode, done.stdout) == (0, "hello from the model\n"), done.stdout + done.stderr


@pytest.mark.parametrize("hog", [NODE_HOG, BUFFER_HOG], ids=["heap", "buffers"])
def test_node_past_the_limit_ends_naming_it(tmp_path, hog):
    _need("javascript")
    source = tmp_path / "hog.js"
    source.write_text(hog)
    done = execbox("exec", str(source), "--backend", "local", "--memory", "256M", "--timeout", "120")
    assert done.returncode != 0, done.stdout
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("memory limit 256 MB reached (--memory, held as RLIMIT_DATA"), done.stdout[-2000:]
    assert "raise --memory" in last


def test_the_judge_runs_javascript_under_memory(tmp_path):
    _need("javascript")
    source = tmp_path / "add.js"
    source.write_text(
        "const [a, b] = require('fs').readFileSync(0, 'utf8').trim().split(/\\s+/).map(Number);\n"
        "console.log(a + b);\n"
    )
    cases = tmp_path / "cases.json"
    cases.write_text(
        json.dumps([{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "20 22", "expected_stdout": "42"}])
    )
    done = execbox(
        "judge", str(source), "--cases", str(cases), "--backend", "local", "--memory", "256M", "--all"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith("accepted: 2/2 passed"), done.stdout


@pytest.mark.filterwarnings("ignore::execbox.WeakerIsolationWarning")
@pytest.mark.parametrize("isolation", ["namespaces", "landlock"])
def test_the_sandbox_without_a_memory_cgroup_runs_them_too(tmp_path, isolation):
    if isolation == "namespaces":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    else:
        problem = landlock_problem()
        require("Landlock", problem is None, problem or "")
    for language in ("javascript", "java", "go"):
        _need(language)
    limits = Limits(memory_mb=256, timeout_s=60, compile_timeout_s=120)
    options = {"limits": limits, "isolation": isolation, "cgroups": False}
    with SandboxExecutor(workspace=tmp_path / "ws", **options) as executor:
        for language in ("javascript", "java", "go"):
            result = executor.run(CodeBlock(language, HELLO[language][1]))
            assert (result.exit_code, result.stdout) == (0, "hello from the model\n"), (
                language,
                result.output,
            )
        hog = executor.run(CodeBlock("javascript", NODE_HOG))
        assert hog.error is not None and hog.error.name == "MemoryLimit", hog.output[-2000:]
        assert "memory limit 256 MB reached (Limits.memory_mb, held as RLIMIT_DATA" in hog.output
        # Python keeps RLIMIT_AS: its MemoryError names the limit as before
        python = executor.run(CodeBlock("python", "x = bytearray(600 * 1024 * 1024)"))
        assert python.error is not None and python.error.name == "MemoryLimit", python.output
        assert "RLIMIT_AS" in python.output
