"""``POST /run_code``'s languages against a real server on loopback whose
blocks run in the sandbox: SandboxFusion's pytest mode (its success: every
test passed), D (``D_ut``: unittest blocks built in) and C# as the body
veRL posts them, and the refusal of the rest, in SandboxFusion's shape,
naming what is served and why not this one."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from execbox import CodeBlock, Limits
from execbox.backends import create_executor
from execbox.server._sandbox_fusion_languages import (
    SANDBOX_FUSION_LANGUAGES,
    SANDBOX_FUSION_NAMES,
    refusal,
)
from tests.conftest import require, require_namespaces
from tests.server._http import Server, running_server

PASSING = """
def add(a, b):
    return a + b


class TestAdd:
    def test_small(self):
        assert add(2, 2) == 4

    def test_output(self, capfd, tmp_path):
        (tmp_path / "x.txt").write_text("hi")
        print((tmp_path / "x.txt").read_text())
        assert capfd.readouterr().out == "hi\\n"
"""
FAILING = "def test_wrong():\n    assert 1 + 1 == 3\n"
D_UT = """import std.stdio;
int twice(int x) { return 2 * x; }
unittest { assert(twice(2) == 4); }
void main() { foreach (line; stdin.byLine) writeln(line); writeln(twice(21)); }
"""
CSHARP = """using System;
class Program {
    static void Main() {
        string line;
        while ((line = Console.ReadLine()) != null) Console.WriteLine(line);
        Console.WriteLine("hello " + 6 * 7);
    }
}
"""


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    require_namespaces()
    with running_server("--backend", "sandbox", "--no-token", "--max-timeout", "60") as running:
        yield running


def run_code(
    server: Server, language: str, code: str, stdin: str = "", files: dict[str, str] | None = None
) -> dict[str, Any]:
    """The body veRL's reward code posts (its compile and run timeouts: 10 s)."""
    body = {
        "code": code,
        "language": language,
        "stdin": stdin,
        "compile_timeout": 10,
        "run_timeout": 10,
        "files": files or {},
        "fetch_files": [],
    }
    with server.client() as client:
        response = client.post("/run_code", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def test_pytest_mode_passes_where_every_test_passes(server: Server) -> None:
    done = run_code(server, "pytest", PASSING)
    assert done["status"] == "Success", done
    assert done["compile_result"] is None
    run = done["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 0
    assert "2 passed" in run["stdout"], run


def test_pytest_mode_fails_where_a_test_fails(server: Server) -> None:
    done = run_code(server, "pytest", FAILING)
    assert done["status"] == "Failed", done
    run = done["run_result"]
    assert run["status"] == "Finished" and run["return_code"] == 1  # pytest's: tests failed
    assert "1 failed" in run["stdout"] and "assert (1 + 1) == 3" in run["stdout"], run
    # the same code as python only defines the test: it runs to success, as in SandboxFusion
    assert run_code(server, "python", FAILING)["status"] == "Success"


def test_pytest_mode_imports_the_files_sent_beside_it(server: Server) -> None:
    solution = base64.b64encode(b"def add(a, b):\n    return a + b\n").decode()
    test = "from solution import add\n\ndef test_add():\n    assert add(40, 2) == 42\n"
    done = run_code(server, "pytest", test, files={"solution.py": solution})
    assert done["status"] == "Success" and "1 passed" in done["run_result"]["stdout"], done


def test_d_ut_runs_its_unittests_then_main(server: Server) -> None:
    require("gdc", shutil.which("gdc") is not None, "apt-get install gdc (./dev.sh test does)")
    done = run_code(server, "D_ut", D_UT, stdin="echo me\n")
    assert done["status"] == "Success", done
    assert done["compile_result"]["status"] == "Finished" and done["compile_result"]["return_code"] == 0
    assert done["run_result"]["stdout"] == "echo me\n42\n", done
    failing = run_code(server, "D_ut", D_UT.replace("== 4", "== 5"))
    assert failing["status"] == "Failed" and failing["run_result"]["return_code"] == 1, failing
    assert "42" not in failing["run_result"]["stdout"]  # main not run after a failed unittest


def test_csharp_compiles_and_reads_stdin(server: Server) -> None:
    require("mcs", shutil.which("mcs") is not None, "apt-get install mono-mcs (./dev.sh test does)")
    done = run_code(server, "csharp", CSHARP, stdin="echo me\n")
    assert done["status"] == "Success", done
    assert done["run_result"]["stdout"] == "echo me\nhello 42\n", done
    broken = run_code(server, "csharp", "class P { static void Main() { nope(); } }")
    assert broken["status"] == "Failed" and broken["run_result"] is None
    compiled = broken["compile_result"]
    assert compiled["return_code"] != 0 and "CS0103" in compiled["stdout"] + compiled["stderr"], compiled


@pytest.mark.parametrize("name", ["julia", "kotlin_script", "cuda", "cobol"])
def test_a_language_not_served_is_refused_with_what_is(server: Server, name: str) -> None:
    done = run_code(server, name, "print(1)")
    assert done["status"] == "SandboxError" and done["run_result"] is None and done["compile_result"] is None
    message = done["message"]
    assert f"language {name!r} is not served here" in message, message
    assert all(served in message for served in ("pytest", "D_ut", "csharp", "nodejs")), message
    if name == "julia":
        assert "Debian 12 packages no Julia" in message
    if name == "cobol":
        assert "not a SandboxFusion language" in message


def test_every_sandbox_fusion_name_is_served_or_refused_with_its_reason() -> None:
    """veRL's 29 names: each served, or refused saying why (never a bare 'not supported')."""
    assert len(SANDBOX_FUSION_NAMES) == 29 and set(SANDBOX_FUSION_LANGUAGES) <= set(SANDBOX_FUSION_NAMES)
    for name in set(SANDBOX_FUSION_NAMES) - set(SANDBOX_FUSION_LANGUAGES):
        assert "(" in refusal(name).split("not served here: ")[1].split(".")[0], refusal(name)


def test_the_library_names_why_and_what_runs(tmp_path) -> None:
    require_namespaces()
    with create_executor("sandbox", workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        block = ex.run(CodeBlock("julia", "println(1)")).blocks[0]
    assert block.status == "unsupported" and block.error is not None
    assert block.error.name == "UnsupportedLanguage"
    assert "Debian 12 packages no Julia" in block.error.value and "python, pytest" in block.error.value
