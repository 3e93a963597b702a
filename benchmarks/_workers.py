"""Measuring each subject in a process of its own: the worker script prints
one JSON report as its last ``{`` line; a worker that fails or hangs is
reported with the reason, not waited for."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def measure_subjects(
    python: Path,
    worker: Path,
    subjects: Sequence[str],
    args: Sequence[str],
    env: dict[str, str],
    timeout_s: float,
) -> list[dict]:
    reports = []
    for subject in subjects:
        print(f"measuring {subject} ...", file=sys.stderr)
        try:
            done = subprocess.run(
                [str(python), str(worker), subject, *args],
                capture_output=True,
                text=True,
                env=env,
                timeout=timeout_s,
            )
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            reports.append(
                json.loads(lines[-1])
                if lines
                else {"subject": subject, "error": (done.stderr.strip().splitlines() or ["no report"])[-1]}
            )
        except subprocess.TimeoutExpired:
            reports.append({"subject": subject, "error": f"did not finish within {timeout_s} s"})
    return reports
