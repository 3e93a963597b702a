"""Benchmark worker for the RL group (issue 42): ``execbox serve`` as veRL
calls it. Prints one JSON line (run by rl_table.py).

Subjects:

- ``wN`` (N workers, e.g. ``w64``): a fresh ``execbox serve`` on loopback
  with a token and the admission the README's RL section gives
  (``--max-concurrency 256 --max-queue 256 --max-queue-wait 60``),
  then, through the tokened URL veRL is given (``/t/<token>/run_code``)
  and verl_client.py's N threads: HumanEval's 164 canonical solutions
  (veRL's default timeout: compile 10 s, run 10 s; each must score 1), the
  same 164 through ``/v1/judge`` from N threads (humaneval_subjects.py's
  round), and the mixed set: the first MIXED problems with every second one
  replaced by ``while True: pass`` (compile and run timeout LOOP_TIMEOUT_S:
  each right answer must score 1, each loop -3).
- ``mN``: the mixed set alone, on a server as ``wN``'s but with a slot per
  core (``--max-concurrency $(nproc)``, the README's advice before): the
  right answers lost to the line when each loop holds one of few slots for
  its whole timeout.
- ``library``: the 164 through one ``SandboxExecutor`` from 16, 64 and 256
  threads (humaneval_subjects.py's round).

Usage: python rl_subjects.py SUBJECT WORKERS[,WORKERS...] MIXED
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
HUMANEVAL_TIMEOUT_S = 10  # veRL's default (compile and run alike)
LOOP_TIMEOUT_S = 3
LOOP = "while True: pass\n"
WARM_CALLS = 16


def admission() -> list[str]:
    """The README's RL section: a line as long as the clients, a wait past their timeout."""
    return ["--max-queue", "256", "--max-queue-wait", "60"]


SLOTS = 256  # the README's RL section: a slot for each request in flight


def cores() -> int:
    return len(os.sched_getaffinity(0))


def tally(scored: list) -> dict:
    return {str(k): v for k, v in sorted(Counter(s.score for s in scored).items())}


def humaneval(url: str, workers: int, todo: list[dict]) -> dict:
    from humaneval_subjects import program
    from verl_client import Case, run_cases

    cases = [Case(program(p)) for p in todo]
    scored, wall = run_cases(url, cases, workers, HUMANEVAL_TIMEOUT_S, HUMANEVAL_TIMEOUT_S)
    bad = next((s.why for s in scored if s.score != 1), None)
    return {
        "n": len(cases),
        "scored_1": sum(s.score == 1 for s in scored),
        "scores": tally(scored),
        "wall_s": wall,
        "problems_per_s": len(cases) / wall,
        **({"first_bad": bad} if bad else {}),
    }


def mixed(url: str, workers: int, todo: list[dict]) -> dict:
    from humaneval_subjects import program
    from verl_client import Case, run_cases

    cases = [Case(LOOP if i % 2 else program(p)) for i, p in enumerate(todo)]
    scored, wall = run_cases(url, cases, workers, LOOP_TIMEOUT_S, LOOP_TIMEOUT_S)
    right = [s for i, s in enumerate(scored) if i % 2 == 0]
    loops = [s for i, s in enumerate(scored) if i % 2]
    lost = next((s for s in right if s.score != 1), None)
    return {
        "n_right": len(right),
        "right_scored_1": sum(s.score == 1 for s in right),
        "right_scores": tally(right),
        "n_loops": len(loops),
        "loops_timed_out": sum(s.score == -3 for s in loops),
        "loop_scores": tally(loops),
        "wall_s": wall,
        "slowest_right_s": max((s.seconds for s in right), default=0.0),
        **({"first_lost": f"{lost.why} after {lost.seconds:.1f} s"} if lost else {}),
    }


def judge(url: str, workers: int, todo: list[dict]) -> dict:
    import httpx
    import humaneval_subjects
    from serve_subjects import AUTH

    humaneval_subjects.WORKERS = workers  # its round's thread count
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    with httpx.Client(base_url=url, headers=AUTH, timeout=300, limits=limits) as client:
        started = time.perf_counter()
        got = humaneval_subjects.judge_round(client, todo)
        wall = time.perf_counter() - started
    return {
        "n": len(got),
        "passed": sum(ok for ok, _ in got),
        "wall_s": wall,
        "problems_per_s": len(got) / wall,
    }


def served(workers: int, n_mixed: int, wide: bool = False) -> dict:
    from humaneval_subjects import problems
    from serve_subjects import TOKEN, server
    from verl_client import Case, run_cases

    from execbox.server._url_token import run_code_url

    todo = problems()
    width = cores() if wide else SLOTS
    with server("sandbox", width, *admission()) as url:
        verl_url = run_code_url(url, TOKEN)
        run_cases(verl_url, [Case("print(1)", "1")] * WARM_CALLS, WARM_CALLS, 10, 10)  # executors started
        out: dict = {"url_form": run_code_url("http://127.0.0.1:PORT", "TOKEN"), "slots": width}
        if not wide:
            out["humaneval"] = humaneval(verl_url, workers, todo)
            out["judge"] = judge(url, workers, todo)
        out["mixed"] = mixed(verl_url, workers, todo[:n_mixed])
        return out


def library(workers: list[int]) -> dict:
    import humaneval_subjects

    import execbox
    from execbox import Limits

    todo = humaneval_subjects.problems()
    out = {}
    with execbox.SandboxExecutor(limits=Limits(timeout_s=HUMANEVAL_TIMEOUT_S)) as executor:
        humaneval_subjects.library_round(executor, todo[:16])  # started before the clock runs
        for n in workers:
            humaneval_subjects.WORKERS = n
            started = time.perf_counter()
            got = humaneval_subjects.library_round(executor, todo)
            wall = time.perf_counter() - started
            out[str(n)] = {"n": len(got), "passed": sum(ok for ok, _ in got), "wall_s": wall}
            out[str(n)]["problems_per_s"] = len(got) / wall
    return out


def main() -> None:
    subject, workers, n_mixed = sys.argv[1], [int(n) for n in sys.argv[2].split(",")], int(sys.argv[3])
    report: dict = {"subject": subject}
    try:
        if subject == "library":
            report["cells"] = library(workers)
        else:
            report["workers"] = int(subject[1:])
            report.update(served(report["workers"], n_mixed, wide=subject.startswith("m")))
    except Exception as exc:  # noqa: BLE001 - the table says why
        report["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    main()
