"""Benchmarks: execbox beside its peers, in one run, on this machine.

Sets up ``.bench-venv`` (execbox plus the peers at pinned versions: AG2's and
AutoGen's local command-line executors) and measures each subject in its own
process. Prints a markdown table; writes JSON to benchmarks/results/.

Usage: python benchmarks/run.py [--iterations N] [--calls N] [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench-venv"
PEERS = ["ag2==0.13.4", "autogen-ext==0.7.5", "numpy"]
RESULTS = ROOT / "benchmarks" / "results"


def ensure_venv() -> Path:
    python = VENV / "bin" / "python"
    stamp = VENV / (".installed-" + "-".join(p.replace("==", "_") for p in PEERS))
    if stamp.exists():
        return python
    print(f"setting up {VENV.name} with {', '.join(PEERS)} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-e", str(ROOT), *PEERS], check=True)
    stamp.touch()
    return python


def measure(python: Path, subject: str, iterations: int, calls: int) -> dict:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "VIRTUAL_ENV": str(VENV)}
    done = subprocess.run([str(python), str(ROOT / "benchmarks" / "subjects.py"), subject,
                           str(iterations), str(calls)], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return {"subject": subject, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(entry: dict, key: str) -> str:
    if "error" in entry:
        return "error"
    value = entry[key]
    wrong = entry["n"] - entry["correct"]
    return f"{value:.1f}" + (f" ({wrong} wrong)" if wrong else "")


def table(reports: list[dict]) -> str:
    head = ("| subject | print(1) median ms | p95 ms | sh echo median ms | numpy median ms | "
            "2 callers exec/s | 8 callers exec/s | host peak MB |")
    lines = [head, "|" + "---|" * 8]
    for r in reports:
        if "error" in r and "print" not in r:
            lines.append(f"| {r['subject']} | failed: {r['error']} |" + " |" * 6)
            continue
        lines.append(
            f"| {r['subject']} | {cell(r['print'], 'median_ms')} | {cell(r['print'], 'p95_ms')} | "
            f"{cell(r['sh_echo'], 'median_ms')} | {cell(r['numpy'], 'median_ms')} | "
            f"{cell(r['throughput_2'], 'exec_per_s')} | {cell(r['throughput_8'], 'exec_per_s')} | "
            f"{r['peak_rss_mb']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=60, help="runs per latency workload")
    parser.add_argument("--calls", type=int, default=240, help="calls per throughput measurement")
    parser.add_argument("--quick", action="store_true", help="few iterations, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.calls = 8, 32
    python = ensure_venv()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from subjects import SUBJECTS

    reports = []
    for subject in SUBJECTS:
        print(f"measuring {subject} ...", file=sys.stderr)
        reports.append(measure(python, subject, args.iterations, args.calls))
    rendered = table(reports)
    print(rendered)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "when": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "iterations": args.iterations, "calls": args.calls, "peers": PEERS, "reports": reports,
    }
    (RESULTS / "latest.json").write_text(json.dumps(out, indent=2))
    print(f"\nJSON written to {(RESULTS / 'latest.json').relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
