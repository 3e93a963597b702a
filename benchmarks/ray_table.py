"""The ray part of the benchmarks: ray_subjects.py run once, inside a
network namespace of its own with only ``lo`` (``unshare -n`` as root: Ray
looks for its address by "connecting" to 8.8.8.8:53 and could listen on
eth0 otherwise), and its tables: the floors, ``print(1)`` through the ray
backend beside the sandbox executor in process, and runs/s with 1, 2 and 3
nodes of 1 CPU each, which share this machine's cores.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 600
SUBJECT = "ray"


def _row(name: str, entry: dict | None, what: str) -> str:
    if not entry:
        return f"| {name} | error | error | {what} |"
    wrong = f" ({entry['wrong']}/{entry['n']} wrong)" if entry.get("wrong") else ""
    return f"| {name} | {entry['median_ms']:.2f}{wrong} | {entry['p90_ms']:.2f} | {what} |"


def render(report: dict) -> str:
    if "error" in report:
        return f"### Ray backend\n\nerror: {report['error']}\n"
    lines = [
        "### Ray backend: latency (a real cluster on loopback, in its own network namespace)",
        "",
        "| what | median ms | p90 ms | measures |",
        "|---|---|---|---|",
        _row(
            "Ray actor call",
            report.get("ray_call"),
            "floor: `ray.get(actor.ping.remote())`, actor on another node",
        ),
        _row(
            "Ray generator, 1 item", report.get("ray_generator"), "floor: how the backend streams a run back"
        ),
        _row(
            "admission acquire",
            report.get("admission"),
            "admission control's cost per run (one actor call; release not awaited)",
        ),
        _row(
            "sandbox executor, print(1)",
            report.get("sandbox_print"),
            "the backend each node runs, in this process",
        ),
        _row("ray backend, print(1)", report.get("ray_print"), "the same block through a 1-node cluster"),
    ]
    sandbox, ray_ = report.get("sandbox_print"), report.get("ray_print")
    if sandbox and ray_:
        extra = ray_["median_ms"] - sandbox["median_ms"]
        lines += [
            "",
            f"Overhead of the ray backend over the sandbox executor for print(1): "
            f"{extra:+.2f} ms ({ray_['median_ms'] / sandbox['median_ms']:.1f}×), median of "
            f"{ray_['n']} runs each, the same run.",
        ]
    lines += [
        "",
        f"### Ray backend: correct runs/s ({report.get('callers')} threads on one executor)",
        "",
        "| nodes | runs/s | busy answers | wrong |",
        "|---|---|---|---|",
    ]
    local = report.get("sandbox_throughput")
    if local:
        lines.append(
            f"| sandbox executor in process (no Ray) | {local['runs_per_s']:.0f} | - | {local['wrong']} |"
        )
    for entry in report.get("curve", []):
        lines.append(
            f"| {entry['nodes']} × 1 CPU | {entry['runs_per_s']:.0f} | {entry['busy']} | {entry['wrong']} |"
        )
    lines += [
        "",
        'The nodes are Ray nodes on this one machine: their "1 CPU" is a label for Ray\'s scheduler; '
        f"all of them share its {os.cpu_count()} cores, so more nodes add Ray's processes, not "
        "CPU, and the curve shows the backend's spreading and its cost, not a cluster's scaling. "
        f"Cluster start: {report.get('cluster_start_s', 0):.1f} s.",
    ]
    return "\n".join(lines) + "\n"


def run(python: Path, iterations: int, calls: int) -> tuple[list[dict], str]:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        report = {"subject": SUBJECT, "error": "needs root and unshare (a network namespace with only lo)"}
        return [report], render(report)
    # unshare -n sh -c 'ip link set lo up && exec python ray_subjects.py ...'
    wrapper = HERE / "_netns.sh"
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "src")}
    reports = measure_subjects(
        Path("/bin/sh"),
        wrapper,
        [str(python)],
        [str(HERE / "ray_subjects.py"), str(iterations), str(calls)],
        env,
        TIMEOUT_S,
    )
    report = {**reports[0], "subject": SUBJECT}
    return [report], render(report)


if __name__ == "__main__":
    print(run(Path(sys.executable), 60, 240)[1])
