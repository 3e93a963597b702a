"""The scale group: does execbox use the machine's cores? ``print(1)`` from
1 to 64 callers at once, for the library (one executor shared by threads;
an executor per process), for ``execbox serve`` and beside the floor of a
process per call (scale_subjects.py measures each subject in a process of
its own). Renders the runs/s table, CPU per block, and issue 29's targets,
each met or NOT MET. The core count is read, not assumed: the targets of a
16-core host are judged only on one.
"""

from __future__ import annotations

import os
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 900
CALLERS = (1, 2, 4, 8, 16, 64)
SUBJECTS = {
    "floor": "`python -S -c 'print(1)'` per call (no isolation)",
    "shared": "one SandboxExecutor shared by N threads",
    "per_process": "one SandboxExecutor per process, N processes",
    "serve": "`execbox serve` (defaults), N asyncio clients",
    "serve_workers": "`execbox serve --workers auto --max-concurrency 2xcores`, N asyncio clients",
}
# a sandbox pool per process: past 16 processes, the machine's memory and start-up, not the host side
MOST_CALLERS = {"per_process": 16}
HOST_CPU_MS, MACHINE_CPU_MS = 0.5, 2.5  # per pooled print(1), from 64 threads on one executor
MIN_RUNS_8 = 500
SERVE_VS_LIBRARY_64, SERVE_64_VS_16 = 0.8, 0.9
BIG_HOST_CORES, BIG_EXECUTOR, BIG_SERVE = 16, 1500, 1400


def cell(report: dict, callers: int) -> dict | None:
    found = report.get("cells", {}).get(str(callers))
    return None if not found or "error" in found else found


def runs_table(reports: list[dict]) -> str:
    head = "| subject | " + " | ".join(str(n) for n in CALLERS) + " |"
    lines = [head, "|---" * (len(CALLERS) + 1) + "|"]
    for report in reports:
        row = [SUBJECTS.get(report["subject"], report["subject"])]
        for n in CALLERS:
            found = report.get("cells", {}).get(str(n))
            if not found:
                row.append("error" if "error" in report else "—")
            elif "error" in found:
                row.append("error")
            else:
                wrong = f" ({found['wrong']} wrong)" if found["wrong"] else ""
                row.append(f"{found['runs_per_s']:.0f}{wrong}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def cpu_table(reports: list[dict]) -> str:
    lines = [
        "| subject | callers | host CPU / block | machine CPU / block | median latency |",
        "|---|---|---|---|---|",
    ]
    for report in reports:
        if report["subject"] == "floor":
            continue
        for n in (1, 8, 64):
            found = cell(report, n)
            if found:
                lines.append(
                    f"| {report['subject']} | {n} | {found['host_cpu_ms']:.2f} ms | "
                    f"{found['machine_cpu_ms']:.2f} ms | {found['median_ms']:.1f} ms |"
                )
    return "\n".join(lines)


def targets(reports: list[dict], cores: int) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out: list[dict] = []

    def goal(target: str, met: bool | None, measured: str) -> None:
        out.append({"target": target, "met": met, "measured": measured})

    shared64, shared8, shared1 = (cell(by.get("shared", {}), n) for n in (64, 8, 1))
    # the service as one sets it up for throughput: a worker per core
    serve64, serve16 = (cell(by.get("serve_workers", {}), n) for n in (64, 16))
    if shared64:
        goal(
            f"host-process CPU ≤ {HOST_CPU_MS} ms per pooled print(1), 64 threads on one executor",
            shared64["host_cpu_ms"] <= HOST_CPU_MS and not shared64["wrong"],
            f"{shared64['host_cpu_ms']:.2f} ms",
        )
        goal(
            f"machine CPU ≤ {MACHINE_CPU_MS} ms per block, 64 threads on one executor",
            shared64["machine_cpu_ms"] <= MACHINE_CPU_MS and not shared64["wrong"],
            f"{shared64['machine_cpu_ms']:.2f} ms",
        )
    if shared1:
        goal(
            "print(1) median ≤ 2 ms back to back (one caller)",
            shared1["median_ms"] <= 2.0,
            f"{shared1['median_ms']:.1f} ms",
        )
    if shared8:
        goal(
            f"≥ {MIN_RUNS_8} correct runs/s with 8 callers on one executor",
            shared8["runs_per_s"] >= MIN_RUNS_8,
            f"{shared8['runs_per_s']:.0f}/s",
        )
    if serve64 and shared64:
        ratio = serve64["runs_per_s"] / shared64["runs_per_s"]
        goal(
            f"execbox serve --workers auto at 64 clients ≥ {SERVE_VS_LIBRARY_64}× the library's (64 threads)",
            ratio >= SERVE_VS_LIBRARY_64 and not serve64["wrong"],
            f"{ratio:.2f}× ({serve64['runs_per_s']:.0f} vs {shared64['runs_per_s']:.0f}/s)",
        )
    if serve64 and serve16:
        ratio = serve64["runs_per_s"] / serve16["runs_per_s"]
        goal(
            f"execbox serve --workers auto at 64 clients ≥ {SERVE_64_VS_16}× its own at 16",
            ratio >= SERVE_64_VS_16,
            f"{ratio:.2f}× ({serve64['runs_per_s']:.0f} vs {serve16['runs_per_s']:.0f}/s)",
        )
    big = cores >= BIG_HOST_CORES
    why = f"this host has {cores} cores, the target is for {BIG_HOST_CORES}"
    best = max((c["runs_per_s"] for n in CALLERS if (c := cell(by.get("shared", {}), n))), default=0.0)
    goal(
        f"on {BIG_HOST_CORES} cores: one executor ≥ {BIG_EXECUTOR} runs/s",
        (best >= BIG_EXECUTOR) if big else None,
        f"{best:.0f}/s at best" if big else why,
    )
    goal(
        f"on {BIG_HOST_CORES} cores: execbox serve --workers auto ≥ {BIG_SERVE} runs/s at 64 clients",
        (bool(serve64) and serve64["runs_per_s"] >= BIG_SERVE) if big else None,
        f"{serve64['runs_per_s']:.0f}/s" if big and serve64 else why,
    )
    return out


def run(python: Path, calls: int) -> tuple[list[dict], list[dict], str]:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    reports = []
    for subject in SUBJECTS:
        callers = ",".join(str(n) for n in CALLERS if n <= MOST_CALLERS.get(subject, n))
        reports += measure_subjects(
            python, HERE / "scale_subjects.py", [subject], [str(calls), callers], env, TIMEOUT_S
        )
    cores = len(os.sched_getaffinity(0))
    how = (
        f"Each cell: max({calls}, 4 x callers) calls after a warm-up, every output checked. Host CPU "
        "is the process that owns the executor (this one; the N processes together; the server's "
        "processes, its workers with it), user + system; machine CPU is every process's, from "
        "/proc/stat (the jails', the zygote's, the clients'). `execbox serve` runs at its defaults "
        "(one process, --max-concurrency 8; past it a run waits in line), then with a worker process "
        "per core and room for two runs per core (at least 8); each client keeps one connection "
        "(benchmarks/http_load.py). — : not run (a pool per process stops at 16 processes)."
    )
    text = (
        f"Scale: correct print(1) runs per second by callers at once, on {cores} cores\n\n"
        f"{runs_table(reports)}\n\n{how}\n\n{cpu_table(reports)}\n"
    )
    return reports, targets(reports, cores), text
