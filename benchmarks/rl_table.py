"""The RL group (issue 42): ``execbox serve`` under a load client that
calls ``/run_code`` as veRL's reward does (verl_client.py), through the
tokened URL and with the README's RL admission, at 16, 64 and 256 workers
(rl_subjects.py, a process and a fresh server per worker count); beside it
``/v1/judge`` and the library on the same 164 problems; and ``/v1/run``
print(1) throughput at 16 and 64 clients beside the library from 64
threads (scale_subjects.py's ``serve`` and ``shared``). Renders one table,
each target met or NOT MET.
"""

from __future__ import annotations

import os
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 1800
WORKERS = (16, 64, 256)
SERVE_64_VS_16, SERVE_VS_LIBRARY_64 = 0.9, 0.8
MIXED_FULL, MIXED_QUICK = 164, 40


def _mark(met: bool | None) -> str:
    return {True: "met", False: "NOT MET", None: "not measured", "comparison": "a comparison, not a target"}[
        met
    ]


def _cell(report: dict | None, n: int) -> dict | None:
    found = (report or {}).get("cells", {}).get(str(n))
    return None if not found or "error" in found else found


def targets(reports: list[dict], scale: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out: list[dict] = []

    def goal(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": target, "met": met, "measured": measured})

    for n in WORKERS:
        r = by.get(f"w{n}")
        if not r or "error" in r:
            why = (r or {}).get("error", "no report")
            goal(f"veRL-like client, {n} workers: HumanEval 164/164", None, why)
            goal(f"veRL-like client, {n} workers: mixed set, no right answer lost", None, why)
            continue
        he, mx = r["humaneval"], r["mixed"]
        goal(
            f"veRL-like client, {n} workers: HumanEval 164/164",
            he["scored_1"] == he["n"] == 164,
            f"{he['scored_1']}/{he['n']} scored 1 (scores {he['scores']})",
        )
        goal(
            f"veRL-like client, {n} workers: mixed set, no right answer lost",
            mx["right_scored_1"] == mx["n_right"] and mx["loops_timed_out"] == mx["n_loops"],
            f"{mx['right_scored_1']}/{mx['n_right']} right scored 1 {mx['right_scores']}, "
            f"{mx['loops_timed_out']}/{mx['n_loops']} loops -3",
        )
    for (
        n
    ) in WORKERS:  # a comparison, not a target: a slot per core (the old advice) loses answers to the line
        r = by.get(f"m{n}")
        if not r or "error" in r:
            continue
        mx = r["mixed"]
        out.append(
            {
                "target": f"veRL-like client, {n} workers, --max-concurrency {r.get('slots', '?')} "
                "(a slot per core, the old advice): mixed set",
                "met": "comparison",
                "measured": f"{mx['right_scored_1']}/{mx['n_right']} right scored 1 {mx['right_scores']}, "
                f"{mx['loops_timed_out']}/{mx['n_loops']} loops -3",
            }
        )
    by_scale = {r["subject"]: r for r in scale}
    s16, s64 = (_cell(by_scale.get("serve"), n) for n in (16, 64))
    lib64 = _cell(by_scale.get("shared"), 64)
    if s16 and s64:
        ratio = s64["runs_per_s"] / s16["runs_per_s"]
        goal(
            f"execbox serve /v1/run at 64 clients ≥ {SERVE_64_VS_16}× its 16-client throughput",
            ratio >= SERVE_64_VS_16 and not s64["wrong"],
            f"{ratio:.2f}× ({s64['runs_per_s']:.0f} vs {s16['runs_per_s']:.0f}/s)",
        )
    else:
        goal(
            f"execbox serve /v1/run at 64 clients ≥ {SERVE_64_VS_16}× its 16-client throughput",
            None,
            "errored",
        )
    if s64 and lib64:
        ratio = s64["runs_per_s"] / lib64["runs_per_s"]
        goal(
            f"execbox serve /v1/run at 64 clients ≥ {SERVE_VS_LIBRARY_64}× the library from 64 threads",
            ratio >= SERVE_VS_LIBRARY_64 and not s64["wrong"],
            f"{ratio:.2f}× ({s64['runs_per_s']:.0f} vs {lib64['runs_per_s']:.0f}/s)",
        )
    else:
        goal(
            f"execbox serve /v1/run at 64 clients ≥ {SERVE_VS_LIBRARY_64}× the library from 64 threads",
            None,
            "errored",
        )
    return out


def rates_table(reports: list[dict]) -> str:
    """HumanEval problems/s by path and worker count."""
    by = {r["subject"]: r for r in reports}
    lines = [
        "| path | " + " | ".join(f"{n} workers" for n in WORKERS) + " |",
        "|---" * (len(WORKERS) + 1) + "|",
    ]

    def row(label: str, get) -> None:
        cells = []
        for n in WORKERS:
            try:
                one = get(n)
            except (KeyError, TypeError):
                one = None
            cells.append(
                f"{one['problems_per_s']:.1f} ({one.get('passed', one.get('scored_1'))}/164)"
                if one
                else "error"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("/run_code, veRL-like client, tokened URL", lambda n: by[f"w{n}"]["humaneval"])
    row("/v1/judge, httpx, N threads", lambda n: by[f"w{n}"]["judge"])
    row("library, one SandboxExecutor, N threads", lambda n: _cell(by.get("library"), n))
    return "\n".join(lines)


def render(found: list[dict]) -> str:
    lines = ["| target | measured | met |", "|---|---|---|"]
    for t in found:
        lines.append(f"| {t['target']} | {str(t['measured']).replace('|', '/')} | {_mark(t['met'])} |")
    return "\n".join(lines)


def run(python: Path, calls: int, quick: bool) -> tuple[list[dict], list[dict], str]:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    n_mixed = MIXED_QUICK if quick else MIXED_FULL
    workers = ",".join(str(n) for n in WORKERS)
    reports = measure_subjects(
        python,
        HERE / "rl_subjects.py",
        [*(f"w{n}" for n in WORKERS), *(f"m{n}" for n in WORKERS), "library"],
        [workers, str(n_mixed)],
        env,
        TIMEOUT_S,
    )
    scale = measure_subjects(
        python, HERE / "scale_subjects.py", ["serve", "shared"], [str(calls), "16,64"], env, TIMEOUT_S
    )
    found = targets(reports, scale)
    slots = next((r["slots"] for r in reports if "slots" in r), len(os.sched_getaffinity(0)))
    how = (
        f"Server: `execbox serve --token T --max-concurrency {slots} --max-queue 256 --max-queue-wait 60` "
        "(the README's RL section; a fresh one per worker count), called at "
        "`http://127.0.0.1:PORT/t/<token>/run_code` by benchmarks/verl_client.py (requests, a connection "
        "per call, timeout compile + run + 10 s, a 504 retried, a transport error -1). HumanEval: compile "
        "and run timeout 10 s (veRL's default). Mixed: the first "
        f"{n_mixed} problems, every second one `while True: pass`, compile and run timeout 3 s; the "
        "comparison rows run it again on a server with a slot per core (the advice before: answers "
        "wait in line behind loops past veRL's timeout). "
        f"/v1/run throughput: scale_subjects.py's `serve` (defaults) and `shared` cells, max({calls}, 4 x "
        f"clients) print(1) calls each. This machine: {os.cpu_count()} cores, shared with other work."
    )
    text = (
        "RL: execbox serve as veRL calls it\n\n"
        + render(found)
        + "\n\nHumanEval problems/s (passed)\n\n"
        + rates_table(reports)
        + "\n\n"
        + how
        + "\n"
    )
    return reports + scale, found, text
