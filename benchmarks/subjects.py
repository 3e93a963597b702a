"""Benchmark worker: measures one subject (execbox or a peer) in this process
and prints one JSON line. Run by run.py inside the benchmark venv, one
process per subject, so that each subject's peak memory is its own.

Every call's output is checked against the expected output: a call that
prints something else, or raises, counts as wrong (``n - correct``). A
workload whose every call raised, or a subject that cannot be set up, is
reported with ``error`` (the exception's last line), not dropped.

Usage: python subjects.py SUBJECT ITERATIONS THROUGHPUT_CALLS
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
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


class NotSupported(Exception):
    """The subject has no way to run this language: the cell reads n/a."""


# Closed at the end of a measurement (executors with worker processes, sessions).
CLEANUP = contextlib.ExitStack()
# Set by a subject for the notes column (how it was run, caveats).
NOTES: list[str] = []


def floor() -> Runner:
    """A bare interpreter per call: the floor every executor pays."""

    def run(language: str, code: str) -> str:
        argv = [sys.executable, "-c", code] if language == "python" else ["/bin/sh", "-c", code]
        return subprocess.run(argv, capture_output=True, text=True).stdout

    return run


def _execbox_runner(executor) -> Runner:  # noqa: ANN001 - execbox is imported lazily
    import execbox

    CLEANUP.callback(executor.close)
    executor.start()
    return lambda language, code: executor.run(execbox.CodeBlock(language, code)).output


def execbox_local() -> Runner:
    import execbox

    return _execbox_runner(execbox.LocalExecutor(limits=execbox.Limits(timeout_s=60)))


def execbox_sandbox_cold() -> Runner:
    """One bwrap jail per block (``pool=False``)."""
    import execbox

    return _execbox_runner(execbox.SandboxExecutor(pool=False, limits=execbox.Limits(timeout_s=60)))


def execbox_sandbox_pool() -> Runner:
    """The warm pool at its defaults."""
    import execbox

    return _execbox_runner(execbox.SandboxExecutor(pool=True, limits=execbox.Limits(timeout_s=60)))


def execbox_sandbox_pool_numpy() -> Runner:
    import execbox

    return _execbox_runner(
        execbox.SandboxExecutor(pool=True, preload=["numpy"], limits=execbox.Limits(timeout_s=60))
    )


def ag2_local() -> Runner:
    from autogen.coding import CodeBlock, LocalCommandLineCodeExecutor

    executor = LocalCommandLineCodeExecutor(timeout=60, work_dir=tempfile.mkdtemp())
    return lambda language, code: (
        executor.execute_code_blocks([CodeBlock(code=code, language=language)]).output
    )


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


def llm_sandbox_bwrap() -> Runner:
    """llm-sandbox's bubblewrap backend (no container daemon): its defaults
    (seccomp denylist on, no network, a bwrap per command), with one change:
    its Python is this venv's interpreter (its directories bound read-only, as
    execbox binds its own), so numpy is importable inside as it is for the
    other subjects. Its default /usr/bin/python3 need not have numpy; it
    installs libraries only with network='host', and its per-session venv
    (skipped here, skip_environment_setup=True) would see the base
    interpreter's site-packages, not this venv's. A session runs one command
    at a time (an internal lock), so the throughput callers share one session
    and queue.

    It refuses to bind any path under /tmp, /proc, /sys or /dev
    (``LocalSandboxConfig.read_only_paths`` raises a pydantic ValidationError):
    in a checkout under /tmp (a fresh clone there) this venv cannot be bound,
    so its default /usr/bin/python3 runs instead, said in the notes; the numpy
    cell reads n/a when that interpreter has no numpy (Debian's
    python3-numpy, which ``./dev.sh bench`` installs)."""
    from llm_sandbox import SandboxBackend, SandboxSession
    from llm_sandbox.local.config import DEFAULT_READ_ONLY_PATHS, LocalSandboxConfig
    from pydantic import ValidationError

    system = ("/usr", "/bin", "/lib", "/lib64")
    found: list[str] = []
    for path in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.realpath(sys.executable))):
        if not any(path == d or path.startswith(d + "/") for d in system) and path not in found:
            found.append(path)
    interpreter_dirs = [p for p in found if not any(p != q and p.startswith(q + "/") for q in found)]
    try:
        config = LocalSandboxConfig(
            read_only_paths=(*DEFAULT_READ_ONLY_PATHS, *interpreter_dirs), python_executable=sys.executable
        )
    except ValidationError as exc:
        config = LocalSandboxConfig()
        NOTES.append(
            f"this venv ({sys.prefix}) cannot be bound: llm-sandbox refuses it "
            f"({exc.errors()[0]['msg']}), so its default {config.python_executable} runs"
        )
    has_numpy = (
        subprocess.run([config.python_executable, "-c", "import numpy"], capture_output=True).returncode == 0
    )
    if not has_numpy:
        NOTES.append(f"numpy n/a: {config.python_executable} has no numpy (Debian: python3-numpy)")
    session = SandboxSession(
        backend=SandboxBackend.BUBBLEWRAP,
        lang="python",
        sandbox_config=config,
        skip_environment_setup=True,
        default_timeout=60,
    )
    session.open()
    CLEANUP.callback(session.close)
    NOTES.append(
        "a bwrap per call (+ /bin/sh -c, seccomp filter compiled and ldconfig -p run per call); "
        "sh via execute_command; one command at a time per session"
    )

    def run(language: str, code: str) -> str:
        if language == "python" and "import numpy" in code and not has_numpy:
            raise NotSupported("numpy")
        if language == "python":
            result = session.run(code)
        elif language == "sh":
            result = session.execute_command(code)
        else:
            raise NotSupported(language)
        if result.exit_code:
            return result.stdout + result.stderr
        return result.stdout

    return run


SUBJECTS: dict[str, Callable[[], Runner]] = {
    "python -c (floor)": floor,
    "execbox local": execbox_local,
    "execbox sandbox cold": execbox_sandbox_cold,
    "execbox sandbox pool": execbox_sandbox_pool,
    "execbox sandbox pool+preload numpy": execbox_sandbox_pool_numpy,
    "llm-sandbox (bwrap)": llm_sandbox_bwrap,
    "AG2 local": ag2_local,
    "AutoGen local": autogen_local,
}


def describe(exc: BaseException) -> str:
    """The exception's type and the last non-empty line of its message."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


class Calls:
    """Counts of one measurement's calls: correct ones, raised ones, and the
    first few exception descriptions."""

    def __init__(self) -> None:
        self.correct = 0
        self.raised = 0
        self.errors: list[str] = []
        self._lock = threading.Lock()

    def call(self, run: Runner, language: str, code: str, expect: str) -> None:
        """One call; correct when its output is the expected one. A raised
        exception counts as a wrong output."""
        try:
            ok = run(language, code).strip() == expect
        except NotSupported:
            raise
        except Exception as exc:  # noqa: BLE001 - a failing call is counted, not fatal
            with self._lock:
                self.raised += 1
                if len(self.errors) < 3:
                    self.errors.append(describe(exc))
            return
        with self._lock:
            self.correct += ok

    def report(self, n: int) -> dict:
        out: dict = {"correct": self.correct, "n": n}
        if self.errors:
            out["raised"] = self.raised
            out["errors"] = self.errors
            if self.raised >= n:  # nothing but exceptions: the figure means nothing
                out["error"] = self.errors[-1]
        return out


# Paced: an idle gap before each call, as between an agent's model turns (the
# back-to-back figure shows sustained load; a pool refills during the gap).
PACE_S = 0.02


def latency(
    run: Runner, language: str, code: str, expect: str, iterations: int, pause_s: float = 0.0
) -> dict:
    warmup = Calls()
    for _ in range(3):
        warmup.call(run, language, code, expect)
    calls, times = Calls(), []
    for _ in range(iterations):
        if pause_s:
            time.sleep(pause_s)
        started = time.perf_counter()
        calls.call(run, language, code, expect)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {
        "median_ms": statistics.median(times),
        "p95_ms": times[int(0.95 * (len(times) - 1))],
        **calls.report(iterations),
    }


def throughput(run: Runner, callers: int, calls: int) -> dict:
    """``callers`` threads share one executor; each call prints its own value,
    and is counted correct only when that value (and nothing else) comes back."""
    per_caller = max(1, calls // callers)
    counts = Calls()

    def caller(k: int) -> None:
        for i in range(per_caller):
            value = k * 100000 + i
            counts.call(run, "python", f"print({value})", str(value))

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(callers)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    total = per_caller * callers
    return {
        "exec_per_s": total / elapsed,
        "correct_per_s": counts.correct / elapsed,
        "elapsed_s": elapsed,
        **counts.report(total),
    }


def measure(subject: str, iterations: int, calls: int) -> dict:
    report: dict = {"subject": subject}
    try:
        run = SUBJECTS[subject]()
    except Exception as exc:  # noqa: BLE001 - the row says why
        report["error"] = describe(exc)
        return report
    for name, (language, code, expect) in WORKLOADS.items():
        try:
            report[name] = latency(run, language, code, expect, iterations)
        except NotSupported:
            report[name] = {"na": True}
    report["print_paced"] = latency(run, "python", "print(1)", "1", iterations, pause_s=PACE_S)
    for callers in (2, 8):
        report[f"throughput_{callers}"] = throughput(run, callers, calls)
    return report


def main() -> None:
    subject, iterations, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    report: dict | None = None
    try:
        with CLEANUP:
            report = measure(subject, iterations, calls)
    except Exception as exc:  # noqa: BLE001 - the row (or its notes) says why
        if report is None:
            report = {"subject": subject, "error": describe(exc)}
        else:
            NOTES.append(f"closing failed: {describe(exc)}")
    if NOTES:
        report["notes"] = NOTES
    report["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(report))


if __name__ == "__main__":
    main()
