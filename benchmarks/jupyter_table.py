"""The stateful part of the benchmarks: runs jupyter_subjects.py once per
subject (each in its own process), renders the table and the Jupyter
backend's targets."""

from __future__ import annotations

import os
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 300  # a peer that hangs (seen: AG2 gateway executor) is reported, not waited for
LOCAL = "execbox jupyter (local kernel)"
JAILED = "execbox jupyter (jailed kernel)"
GATEWAY = "execbox jupyter (local gateway)"
SESSION = "execbox sandbox stateful"
AUTOGEN = "AutoGen JupyterCodeExecutor"


def measure_all(python: Path, iterations: int, env: dict[str, str]) -> list[dict]:
    from jupyter_subjects import SUBJECTS  # noqa: PLC0415 - the worker's list, one place

    return measure_subjects(python, HERE / "jupyter_subjects.py", SUBJECTS, [str(iterations)], env, TIMEOUT_S)


def _fig(report: dict, key: str, field: str = "median_ms") -> str:
    entry = report.get(key)
    if not entry:
        return "error" if "error" in report else "-"
    text = f"{entry[field]:.1f}"
    return text if entry.get("correct", True) else text + " (wrong)"


def table(reports: list[dict]) -> str:
    lines = [
        "| subject | x = 1 median ms | x = 1 p95 ms | kernel start median ms | start p95 ms "
        "| new executor's first call median ms | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        note = r.get("error", "").replace("|", "\\|")
        lines.append(
            f"| {r['subject']} | {_fig(r, 'x1')} | {_fig(r, 'x1', 'p95_ms')} | {_fig(r, 'start')} "
            f"| {_fig(r, 'start', 'p95_ms')} | {_fig(r, 'first_call')} | {note} |"
        )
    return "\n".join(lines)


def targets(reports: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out = []

    def goal(text: str, subject: str, key: str, bound: float) -> None:
        entry = by.get(subject, {}).get(key)
        if not entry:
            out.append({"target": text, "met": None, "measured": "subject errored"})
            return
        ok = entry["median_ms"] <= bound and entry.get("correct", True)
        out.append({"target": text, "met": ok, "measured": f"{entry['median_ms']:.1f} ms"})

    goal(f"stateful x = 1 ≤ 3 ms, local kernel ({LOCAL})", LOCAL, "x1", 3.0)
    goal(f"stateful x = 1 ≤ 3 ms, jailed kernel ({JAILED})", JAILED, "x1", 3.0)
    goal(f"stateful x = 1 ≤ 5 ms through a local gateway ({GATEWAY})", GATEWAY, "x1", 5.0)
    session, autogen = (by.get(name, {}).get("x1") for name in (SESSION, AUTOGEN))
    text = f"stateful x = 1 ≤ 1.5 ms and ≥ 3× faster than {AUTOGEN}, same run ({SESSION})"
    if not session or not autogen:
        out.append(
            {"target": text, "met": None, "measured": f"{SESSION if not session else AUTOGEN} errored"}
        )
    else:
        ratio = autogen["median_ms"] / session["median_ms"]
        met = session["median_ms"] <= 1.5 and ratio >= 3.0 and session.get("correct", True)
        out.append(
            {
                "target": text,
                "met": met,
                "measured": f"{session['median_ms']:.2f} ms, AutoGen's "
                f"{autogen['median_ms']:.1f} ms: {ratio:.1f}× faster",
            }
        )
    goal(f"kernel start ≤ 500 ms ({LOCAL})", LOCAL, "start", 500.0)
    goal(f"kernel start ≤ 500 ms ({JAILED})", JAILED, "start", 500.0)
    goal(f"first call of a new executor ≤ 20 ms, warm pool ({JAILED})", JAILED, "first_call", 20.0)
    goal(f"first call of a new executor ≤ 20 ms, warm pool ({LOCAL})", LOCAL, "first_call", 20.0)
    return out


def run(python: Path, iterations: int) -> tuple[list[dict], list[dict], str]:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    reports = measure_all(python, iterations, env)
    found = targets(reports)
    text = (
        table(reports) + "\n\nFigures in ms: x = 1 is a warm round trip on a kept kernel (state checked "
        "after); kernel start is a new executor until its first result (execbox without its warm "
        "pool; the gateway rows' first start includes the server's; the sandbox session's, its jail "
        "and zygote); the first-call column is "
        "execbox's warm pool handing a started kernel to a new executor.\n"
    )
    return reports, found, text
