"""The container part of the benchmarks: runs docker_subjects.py once per
subject (each in its own process), renders the table and the docker
backend's targets: ``print(1)`` per exec and container start of execbox's
docker backend on runc and on gVisor (runsc), beside AG2's
DockerCommandLineCodeExecutor and the raw Docker SDK on the same local image
(execbox/base:latest; no registry is used)."""

from __future__ import annotations

import os
from pathlib import Path

from _workers import measure_subjects

HERE = Path(__file__).resolve().parent
TIMEOUT_S = 240
EXECS, STARTS = 30, 8
QUICK_EXECS, QUICK_STARTS = 10, 3
RUNC, RUNSC = "execbox docker (runc)", "execbox docker (runsc)"
FLOOR_RUNC, FLOOR_RUNSC = "docker SDK floor (runc)", "docker SDK floor (runsc)"

# How each subject runs, for the notes column.
HOW = {
    FLOOR_RUNC: "containers.run(detach=True, stdin_open=True) of `sleep infinity`, no network; "
    "exec_run(['python3','-c',...], stdin=True) (stdin attached: the engine's default, the host's "
    "/dev/null, is given to gVisor's sandbox user)",
    FLOOR_RUNSC: "the same with runtime='runsc'",
    RUNC: "defaults: no network, read-only root, non-root user, no capabilities, init, memory/pids limits; "
    "code written to the workspace, each block sent to execbox's agent in the container (the container's "
    "command) over its attached stream: a Python block forked in the agent's warm interpreter",
    RUNSC: "the same with runtime='runsc'",
    "AG2 DockerCommandLineCodeExecutor": "image='execbox/base:latest' as given; runs `timeout 60 python FILE` and "
    "takes only language 'python' for Python, the image has python3 and no "
    "python; its containers killed, not stopped (close not timed)",
    "AG2 DockerCommandLineCodeExecutor + python link": "the same image plus a read-only bind mount at "
    "/usr/local/bin holding python -> /usr/bin/python3 "
    "(container_create_kwargs mounts); AG2 defaults: root, "
    "bridge network, tty /bin/sh; close = stop(), timed once "
    "(n=1), the other containers killed",
}


def measure_all(python: Path, execs: int, starts: int, env: dict[str, str]) -> list[dict]:
    from docker_subjects import SUBJECTS  # noqa: PLC0415 - the worker's list, one place

    return measure_subjects(
        python, HERE / "docker_subjects.py", SUBJECTS, [str(execs), str(starts)], env, TIMEOUT_S
    )


def _fig(report: dict, key: str, field: str = "median_ms") -> str:
    entry = report.get(key)
    if not entry:
        return "error" if "error" in report else "-"
    if entry.get("wrong") and entry["wrong"] >= entry["n"]:
        return "fails"
    text = f"{entry[field]:.1f}"
    return text + (f" ({entry['wrong']}/{entry['n']} wrong)" if entry.get("wrong") else "")


def notes(report: dict) -> str:
    parts = []
    if "error" in report:
        parts.append(f"error: {report['error']}")
    for key in ("first", "exec"):
        wrong = (report.get(key) or {}).get("first_wrong")
        if wrong:
            parts.append(
                f"every print(1) gave `{wrong}`"
                if report[key]["wrong"] >= report[key]["n"]
                else f"first wrong output: `{wrong}`"
            )
            break
    parts.append(HOW.get(report["subject"], ""))
    return "; ".join(p for p in parts if p).replace("|", "\\|").replace("\n", " ")


def table(reports: list[dict]) -> str:
    lines = [
        "| subject | print(1) median ms | p95 ms | container start median ms | start p95 ms "
        "| first block median ms | new → first result median ms | close median ms | notes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        lines.append(
            f"| {r['subject']} | {_fig(r, 'exec')} | {_fig(r, 'exec', 'p95_ms')} | {_fig(r, 'start')} "
            f"| {_fig(r, 'start', 'p95_ms')} | {_fig(r, 'first')} | {_fig(r, 'new_to_first')} "
            f"| {_fig(r, 'close')} | {notes(r)} |"
        )
    return "\n".join(lines)


def targets(reports: list[dict]) -> list[dict]:
    by = {r["subject"]: r for r in reports}
    out = []

    def faster(subject: str, floor: str, times: float) -> None:
        text = f"print(1) ≥ {times:g}× faster than the SDK's exec_run in the same run ({subject})"
        entry, base = by.get(subject, {}).get("exec"), by.get(floor, {}).get("exec")
        if not entry or not base:
            out.append({"target": text, "met": None, "measured": "a subject errored"})
            return
        ratio = base["median_ms"] / entry["median_ms"]
        out.append(
            {
                "target": text,
                "met": ratio >= times and not entry.get("wrong"),
                "measured": f"{ratio:.1f}× ({entry['median_ms']:.1f} ms against {base['median_ms']:.1f} ms)",
            }
        )

    def goal(text: str, subject: str, key: str, bound: float, floor: str) -> None:
        entry = by.get(subject, {}).get(key)
        if not entry:
            out.append({"target": text, "met": None, "measured": "subject errored"})
            return
        measured = f"{entry['median_ms']:.1f} ms"
        base = by.get(floor, {}).get(key)
        if base:
            measured += f" (raw SDK on the same runtime: {base['median_ms']:.1f} ms)"
        if entry.get("wrong"):
            measured += f", {entry['wrong']}/{entry['n']} wrong"
        out.append(
            {
                "target": text,
                "met": entry["median_ms"] <= bound and not entry.get("wrong"),
                "measured": measured,
            }
        )

    for subject, floor, bound in ((RUNC, FLOOR_RUNC, 10.0), (RUNSC, FLOOR_RUNSC, 20.0)):
        goal(f"print(1) per block ≤ {bound:g} ms ({subject})", subject, "exec", bound, floor)
        faster(subject, floor, 5.0)
        goal(f"container start ≤ 250 ms ({subject})", subject, "start", 250.0, floor)
    both = all(by.get(s, {}).get("exec") and by.get(s, {}).get("start") for s in (RUNC, RUNSC))
    out.append(
        {
            "target": "gVisor (runsc) figures beside runc",
            "met": both,
            "measured": "both rows measured" if both else "a row errored",
        }
    )
    return out


def run(python: Path, quick: bool = False) -> tuple[list[dict], list[dict], str]:
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    execs, starts = (QUICK_EXECS, QUICK_STARTS) if quick else (EXECS, STARTS)
    reports = measure_all(python, execs, starts, env)
    found = targets(reports)
    text = (
        table(reports)
        + f'\n\nFigures in ms, every output checked (`print(1)` must give 1; "fails" = no call '
        f"gave it, see notes). print(1): {execs} calls on a started executor after {3} warm-up calls. Start: "
        f"a new executor until ready ({starts} starts after an untimed one; with {starts} samples the p95 is "
        "the slowest); first block: the first print(1) on that new container; new → first result: the two "
        "together; close: close()/stop() (floor: remove(force=True)). Image: execbox/base:latest, local.\n"
    )
    return reports, found, text
