"""Benchmark worker: measures one subject (execbox or a peer) in this process
and prints one JSON line. Run by run.py inside the benchmark venv, one
process per subject, so that each subject's peak memory is its own.

Usage: python subjects.py SUBJECT ITERATIONS THROUGHPUT_CALLS
"""

from __future__ import annotations

import asyncio
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

WORKLOADS = {
    "print": ("python", "print(1)", "1"),
    "sh_echo": ("sh", "echo hi", "hi"),
    "numpy": ("python", "import numpy as np\nprint(int(np.arange(10).sum()))", "45"),
}

Runner = Callable[[str, str], str]  # (language, code) -> output


def floor() -> Runner:
    """A bare interpreter per call: the floor every executor pays."""

    def run(language: str, code: str) -> str:
        argv = [sys.executable, "-c", code] if language == "python" else ["/bin/sh", "-c", code]
        return subprocess.run(argv, capture_output=True, text=True).stdout

    return run


def execbox_local() -> Runner:
    import execbox

    executor = execbox.LocalExecutor(limits=execbox.Limits(timeout_s=60))
    executor.start()
    return lambda language, code: executor.run(execbox.CodeBlock(language, code)).output


def execbox_sandbox() -> Runner:
    import execbox

    executor = execbox.SandboxExecutor(limits=execbox.Limits(timeout_s=60))
    executor.start()
    return lambda language, code: executor.run(execbox.CodeBlock(language, code)).output


def ag2_local() -> Runner:
    from autogen.coding import CodeBlock, LocalCommandLineCodeExecutor

    executor = LocalCommandLineCodeExecutor(timeout=60, work_dir=tempfile.mkdtemp())
    return lambda language, code: executor.execute_code_blocks([CodeBlock(code=code, language=language)]).output


def autogen_local() -> Runner:
    from autogen_core import CancellationToken
    from autogen_core.code_executor import CodeBlock
    from autogen_ext.code_executors.local import LocalCommandLineCodeExecutor

    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    executor = LocalCommandLineCodeExecutor(timeout=60, work_dir=tempfile.mkdtemp())
    asyncio.run_coroutine_threadsafe(executor.start(), loop).result()

    def run(language: str, code: str) -> str:
        job = executor.execute_code_blocks([CodeBlock(code=code, language=language)], CancellationToken())
        return asyncio.run_coroutine_threadsafe(job, loop).result().output

    return run


SUBJECTS: dict[str, Callable[[], Runner]] = {
    "python -c (floor)": floor,
    "execbox local": execbox_local,
    "execbox sandbox (a jail per block)": execbox_sandbox,
    "AG2 local": ag2_local,
    "AutoGen local": autogen_local,
}


def latency(run: Runner, language: str, code: str, expect: str, iterations: int) -> dict:
    for _ in range(3):
        run(language, code)
    times, correct = [], 0
    for _ in range(iterations):
        started = time.perf_counter()
        out = run(language, code)
        times.append((time.perf_counter() - started) * 1000)
        correct += out.strip() == expect
    times.sort()
    return {"median_ms": statistics.median(times), "p95_ms": times[int(0.95 * (len(times) - 1))],
            "correct": correct, "n": iterations}


def throughput(run: Runner, callers: int, calls: int) -> dict:
    """``callers`` threads share one executor; each call prints its own value."""
    per_caller = max(1, calls // callers)
    correct = [0] * callers

    def caller(k: int) -> None:
        for i in range(per_caller):
            value = k * 100000 + i
            if run("python", f"print({value})").strip() == str(value):
                correct[k] += 1

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    total = per_caller * callers
    return {"exec_per_s": total / elapsed, "correct": sum(correct), "n": total}


def main() -> None:
    subject, iterations, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    run = SUBJECTS[subject]()
    report: dict = {"subject": subject}
    for name, (language, code, expect) in WORKLOADS.items():
        try:
            report[name] = latency(run, language, code, expect, iterations)
        except Exception as exc:  # a peer that cannot run a workload is reported, not fatal
            report[name] = {"error": f"{type(exc).__name__}: {exc}"}
    for callers in (2, 8):
        report[f"throughput_{callers}"] = throughput(run, callers, calls)
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report))


if __name__ == "__main__":
    main()
