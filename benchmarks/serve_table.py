"""The service part of the benchmarks: ``execbox serve`` beside the
library. Runs serve_subjects.py once per backend (each in its own process,
with its own server), renders the latency, throughput and batch tables and
the service's targets, and says whether SandboxFusion could be set beside
it (only when it installs from the package index within
``FUSION_TIMEOUT_S``; otherwise its row says why).

The workers run with the interpreter that runs run.py (under dev.sh, the
project's .venv, which has the server extra): no peer is needed here.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 300
BACKENDS = ("sandbox", "local")
FUSION = "SandboxFusion"
FUSION_PACKAGE = "sandbox-fusion"
FUSION_TIMEOUT_S = 120
PATHS = [
    ("library", "library executor.run (kept executor)"),
    ("run", "POST /v1/run"),
    ("session_json", "session execution, JSON"),
    ("session_sse", "session execution, SSE"),
]
OVERHEAD_GOAL_MS = 5.0  # loopback HTTP, JSON and the server's bookkeeping on top of the library
ABANDONED_GOAL_S = 3.0  # issue 42: the next run's answer after 16 abandoned endless runs


def sandbox_fusion(python: Path) -> dict:
    """SandboxFusion's row: why it is not measured (it is only when its
    service installs from the package index, which has been its client alone)."""
    row = {"subject": FUSION}
    with tempfile.TemporaryDirectory() as folder:
        started = time.monotonic()
        try:
            done = subprocess.run(
                [
                    str(python),
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "-q",
                    "-d",
                    folder,
                    FUSION_PACKAGE,
                ],
                capture_output=True,
                text=True,
                timeout=FUSION_TIMEOUT_S,
            )
        except subprocess.TimeoutExpired:
            row["error"] = f"`pip download {FUSION_PACKAGE}` did not finish within {FUSION_TIMEOUT_S} s"
            return row
        took = time.monotonic() - started
        wheels = sorted(Path(folder).glob("*.whl"))
        if done.returncode or not wheels:
            lines = [line for line in done.stderr.splitlines() if line.strip()]
            row["error"] = (
                f"`pip download {FUSION_PACKAGE}` failed: {lines[-1] if lines else done.returncode}"
            )
            return row
        with zipfile.ZipFile(wheels[0]) as wheel:
            names = wheel.namelist()
            meta = next((wheel.read(n).decode() for n in names if n.endswith(".dist-info/METADATA")), "")
            sources = "\n".join(wheel.read(n).decode(errors="replace") for n in names if n.endswith(".py"))
    field = {
        line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in meta.splitlines() if ": " in line
    }
    serves = any(word in sources for word in ("fastapi", "uvicorn", "FastAPI("))
    found = f"`pip download {FUSION_PACKAGE}` gave {wheels[0].name} in {took:.1f} s"
    if serves:
        row["error"] = f"{found}, which seems to hold a server, but this benchmark has no driver for it yet"
    else:
        modules = sorted({Path(n).stem for n in names if n.endswith(".py") and not n.endswith("__init__.py")})
        row["error"] = (
            f'{found}: "{field.get("Summary", "?")}" (modules {", ".join(modules)}; no server in '
            "it): it posts to a SandboxFusion service (SANDBOX_FUSION_ENDPOINT, default "
            "localhost:8080), and that service is not on the package index (it ships as a "
            "container image), so there is nothing to run beside execbox serve here"
        )
    return row


def _ms(entry: dict | None, key: str) -> str:
    return "error" if not entry else f"{entry[key]:.1f}"


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def latency_table(reports: list[dict]) -> str:
    lines = [
        "| backend | print(1) through | median ms | p90 ms | over the library: ms | × the library | notes |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        if r["subject"] == FUSION:
            lines.append(f"| {FUSION} | - | - | - | - | - | not measured: {_escape(r['error'])} |")
            continue
        base = r.get("library")
        for key, label in PATHS:
            e = r.get(key)
            notes = []
            if e and e["wrong"]:
                notes.append(f"{e['wrong']}/{e['n']} wrong, first: `{e.get('first_wrong', '')}`")
            if not e and "error" in r:
                notes.append(f"error: {r['error']}")
            over = times = "-"
            if e and base and key != "library":
                over = f"{e['median_ms'] - base['median_ms']:+.1f}"
                times = f"{e['median_ms'] / base['median_ms']:.2f}×"
            lines.append(
                f"| {r['subject']} | {label} | {_ms(e, 'median_ms')} | {_ms(e, 'p90_ms')} | {over} "
                f"| {times} | {_escape('; '.join(notes))} |"
            )
    return "\n".join(lines)


def throughput_table(reports: list[dict]) -> str:
    lines = [
        "| backend | server --max-concurrency | clients | correct runs/s | 429s (retried) | wrong | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        for key, width in (
            ("throughput_library", "library: threads, no HTTP (the floor)"),
            ("throughput", r.get("max_concurrency")),
            ("throughput_wide", 64),
        ):
            for e in r.get(key) or []:
                wrong = str(e["wrong"]) + (
                    f" (first: `{_escape(e['first_wrong'])}`)" if e.get("first_wrong") else ""
                )
                lines.append(
                    f"| {r['subject']} | {width} | {e['clients']} | {e['correct_per_s']:.0f} | {e['busy']} "
                    f"| {wrong} | {e['elapsed_s']:.1f} |"
                )
    return "\n".join(lines)


def batch_table(reports: list[dict]) -> str:
    lines = [
        "| backend | 64 print(1) runs as | wall ms (median of 3) | runs/s | × the batch | wrong |",
        "|---|---|---|---|---|---|",
    ]
    for r in reports:
        b = r.get("batch")
        if not b:
            continue
        labels = {
            "batch": "one POST /v1/batch",
            "sequential": "64 POST /v1/run, one after the other",
            "concurrent": f"64 POST /v1/run, {b['width']} at a time",
        }
        for key, label in labels.items():
            e = b[key]
            lines.append(
                f"| {r['subject']} | {label} | {e['wall_ms']:.0f} | {e['runs'] * 1000 / e['wall_ms']:.0f} "
                f"| {e['wall_ms'] / b['batch']['wall_ms']:.2f}× | {e['wrong']} |"
            )
    return "\n".join(lines)


def targets(reports: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out = []
    sandbox = by.get("sandbox", {})
    base = sandbox.get("library")
    for key, label in PATHS[1:]:
        goal = f"{label} ≤ the library + {OVERHEAD_GOAL_MS:g} ms, median (sandbox)"
        entry = sandbox.get(key)
        if not entry or not base:
            out.append({"target": goal, "met": None, "measured": "not measured (see the table)"})
            continue
        over = entry["median_ms"] - base["median_ms"]
        out.append(
            {
                "target": goal,
                "met": over <= OVERHEAD_GOAL_MS and not entry["wrong"],
                "measured": f"+{over:.1f} ms ({entry['median_ms']:.1f} vs {base['median_ms']:.1f} ms)"
                + (f", {entry['wrong']} wrong" if entry["wrong"] else ""),
            }
        )
    served = [r for r in reports if r["subject"] in BACKENDS]
    loads = [e for r in served for key in ("throughput", "throughput_wide") for e in r.get(key) or []]
    wrong = sum(e["wrong"] for e in loads)
    goal = "under 16 and 64 clients every answer a right result or a 429 (no 5xx, no wrong output)"
    out.append(
        {
            "target": goal,
            "met": (not wrong) if loads else None,
            "measured": f"{sum(e['correct'] for e in loads)} right, {sum(e['busy'] for e in loads)} 429s, "
            f"{wrong} other"
            if loads
            else "not measured",
        }
    )
    b = sandbox.get("batch")
    goal = "one /v1/batch of 64 no slower than 64 /v1/run sent as many at a time as the server runs (sandbox)"
    if b:
        out.append(
            {
                "target": goal,
                "met": b["batch"]["wall_ms"] <= b["concurrent"]["wall_ms"],
                "measured": f"{b['batch']['wall_ms']:.0f} ms vs {b['concurrent']['wall_ms']:.0f} ms",
            }
        )
    else:
        out.append({"target": goal, "met": None, "measured": "not measured"})
    for name in BACKENDS:
        out.append(abandoned_target(name, by.get(name, {}).get("abandoned")))
    return out


def abandoned_target(backend: str, entry: dict | None) -> dict:
    goal = (
        f"16 abandoned endless runs at the defaults, then print(6*7): seconds to answer "
        f"≤ {ABANDONED_GOAL_S:g} s ({backend})"
    )
    if not entry:
        return {"target": goal, "met": None, "measured": "not measured (see the table)"}
    after = entry["load_after"]
    return {
        "target": goal,
        "met": entry["right"] and entry["answer_s"] <= ABANDONED_GOAL_S,
        "measured": f"{entry['answer_s']:.2f} s"
        + ("" if entry["right"] else f", wrong: {entry.get('answer', '?')}")
        + f" (clients left {entry['after_s']:g} s after the server "
        + ("held them all" if entry.get("held") else "had not read them all")
        + f"; then running {after['running']}, "
        f"queued {after['queued']}, slots given {after['admitted']}, left the line {after['abandoned']})",
    }


def run(python: Path, iterations: int, calls: int) -> tuple[list[dict], list[dict], str]:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    reports = measure_subjects(
        python, HERE / "serve_subjects.py", BACKENDS, [str(iterations), str(calls)], env, TIMEOUT_S
    )
    print(f"trying {FUSION} ({FUSION_PACKAGE} from the package index) ...", file=sys.stderr)
    reports.append(sandbox_fusion(python))
    served = [r for r in reports if r["subject"] in BACKENDS]
    width = next((r["max_concurrency"] for r in served if "max_concurrency" in r), "?")
    retry = next((r["busy_retry_s"] for r in served if "busy_retry_s" in r), "?")
    text = (
        latency_table(reports)
        + f"\n\nprint(1) after 5 warm-up calls, {iterations} calls each, every output checked; the library is "
        "create_executor(backend) kept and started; the service is `execbox serve` (uvicorn) on a loopback "
        "port, called with one kept-alive httpx connection; a session's execution over SSE is timed until its "
        "`end` event. Over the library: the median's difference and ratio.\n\n"
        + throughput_table(reports)
        + f"\n\nPOST /v1/run print(1) from concurrent asyncio clients (one connection each, one untimed run "
        f"each first) until {calls} right results. The server runs at most --max-concurrency executions at "
        f"once (the default, {width}) and answers 429 past it; a client retries a 429 after {retry} s (one "
        "that honours Retry-After waits 1 s). Client and server share this machine's "
        f"{os.cpu_count()} cores; with many clients the server's event loop is itself the queue (a request "
        "waits to be read, and finds a free slot when it is), so few 429s are seen there.\n\n"
        + batch_table(reports)
        + "\n"
    )
    return reports, targets(reports), text
