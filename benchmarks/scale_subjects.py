"""Benchmark worker for the scale group: one subject, ``print(1)`` from 1,
2, 4 ... callers at once, each output checked. Prints one JSON line (run by
scale_table.py).

Subjects:
- ``floor``: ``python -S -c 'print(1)'``, a process per call (what a
  service that spawns per request costs, isolating nothing);
- ``shared``: one ``SandboxExecutor`` (the pool) shared by N threads;
- ``per_process``: one ``SandboxExecutor`` in each of N processes;
- ``serve``: ``execbox serve`` at its defaults (``--max-concurrency 8``:
  past it a run waits in line), N asyncio clients on loopback, each on a
  kept connection (``http_load.py``: its cost per request does not grow
  with N, as httpx's pool does);
- ``serve_workers``: the same with ``--workers auto`` and
  ``--max-concurrency`` twice the cores (at least 8).

For each caller count: correct runs per second; host CPU per block (the
process that owns the executor: this one, the N processes together, or the
server's process; user + system time); machine CPU per block (every
process, from /proc/stat); the median latency of a call.

Usage: python scale_subjects.py SUBJECT CALLS CALLERS[,CALLERS...]
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable

EXPECTED = "1\n"
WARMUP = 8
TICK = os.sysconf("SC_CLK_TCK")
CORES = len(os.sched_getaffinity(0))
# calls per warm-up connection of the service: enough for each worker to have made the executors
# its share of the concurrency needs (each run holds one; a worker makes one at each new high)
WARM_CALLS = 8


def machine_busy_s() -> float:
    """CPU seconds every process of this machine has used (all but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(n) for n in stat.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def process_cpu_s(pid: int) -> float:
    """User + system seconds of ``pid`` (its threads; not its children)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def tree_cpu_s(pid: int) -> float:
    """User + system seconds of ``pid`` and of its live descendants (the
    workers of ``execbox serve --workers``)."""
    total, todo = 0.0, [pid]
    while todo:
        one = todo.pop()
        try:
            total += process_cpu_s(one)
            for task in os.listdir(f"/proc/{one}/task"):
                with open(f"/proc/{one}/task/{task}/children") as kids:
                    todo += [int(kid) for kid in kids.read().split()]
        except FileNotFoundError:
            continue  # gone meanwhile
    return total


def shares(calls: int, callers: int) -> list[int]:
    """``calls`` split among ``callers`` as evenly as whole numbers go."""
    return [calls // callers + (1 if n < calls % callers else 0) for n in range(callers)]


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.times: list[float] = []
        self.wrong = 0
        self.first_wrong: str | None = None

    def add(self, seconds: float, out: str) -> None:
        with self.lock:
            if out == EXPECTED:
                self.times.append(seconds)
            else:
                self.wrong += 1
                self.first_wrong = self.first_wrong or out[:200]


def timed(call: Callable[[], str], tally: Tally) -> None:
    started = time.perf_counter()
    try:
        out = call()
    except Exception as exc:  # noqa: BLE001 - counted as wrong, not fatal
        out = f"{type(exc).__name__}: {exc}"
    tally.add(time.perf_counter() - started, out)


def threads(callers: int, calls: int, call: Callable[[], str]) -> Tally:
    tally = Tally()
    workers = [
        threading.Thread(target=lambda k=k: [timed(call, tally) for _ in range(k)])
        for k in shares(calls, callers)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return tally


def figures(tally: Tally, calls: int, wall_s: float, host_s: float, machine_s: float) -> dict:
    done = len(tally.times)
    out = {
        "runs_per_s": done / wall_s if wall_s > 0 else 0.0,
        "host_cpu_ms": host_s / calls * 1000,
        "machine_cpu_ms": machine_s / calls * 1000,
        "median_ms": statistics.median(tally.times) * 1000 if tally.times else None,
        "calls": calls,
        "wrong": tally.wrong,
    }
    if tally.first_wrong:
        out["first_wrong"] = tally.first_wrong
    return out


def measured(callers: int, calls: int, call: Callable[[], str], host: Callable[[], float]) -> dict:
    h0, m0, w0 = host(), machine_busy_s(), time.monotonic()
    tally = threads(callers, calls, call)
    wall, h1, m1 = time.monotonic() - w0, host(), machine_busy_s()
    return figures(tally, calls, wall, h1 - h0, m1 - m0)


def floor(callers: int, calls: int) -> dict:
    def call() -> str:
        return subprocess.run(
            [sys.executable, "-S", "-c", "print(1)"], capture_output=True, text=True, check=False
        ).stdout

    return measured(callers, calls, call, lambda: 0.0)  # no host process: its children are the floor


def shared(callers: int, calls: int) -> dict:
    import execbox

    block = execbox.CodeBlock("python", "print(1)")
    with execbox.SandboxExecutor() as executor:
        # warmed at the callers measured: the pool grows a box for each caller waiting, made here and
        # not in the measured run (a box is made once; the steady state is what a service sees)
        threads(callers, WARMUP * min(callers, 8) + 2 * callers, lambda: executor.run(block).stdout)
        return measured(callers, calls, lambda: executor.run(block).stdout, time.process_time)


def _one_process(calls: int, ready: multiprocessing.Barrier, queue: multiprocessing.Queue) -> None:
    import execbox

    block = execbox.CodeBlock("python", "print(1)")
    with execbox.SandboxExecutor() as executor:
        threads(1, WARMUP, lambda: executor.run(block).stdout)
        ready.wait()
        c0 = time.process_time()
        tally = threads(1, calls, lambda: executor.run(block).stdout)
        queue.put((len(tally.times), tally.wrong, tally.first_wrong, time.process_time() - c0, tally.times))


def per_process(callers: int, calls: int) -> dict:
    context = multiprocessing.get_context("spawn")
    ready, queue = context.Barrier(callers + 1), context.Queue()
    procs = [context.Process(target=_one_process, args=(k, ready, queue)) for k in shares(calls, callers)]
    for proc in procs:
        proc.start()
    ready.wait(timeout=300)
    m0, w0 = machine_busy_s(), time.monotonic()
    parts = [queue.get(timeout=600) for _ in procs]
    wall, m1 = time.monotonic() - w0, machine_busy_s()
    for proc in procs:
        proc.join(60)
    tally = Tally()
    for _, wrong, first, _, times in parts:
        tally.times.extend(times)
        tally.wrong += wrong
        tally.first_wrong = tally.first_wrong or first
    return figures(tally, calls, wall, sum(part[3] for part in parts), m1 - m0)


def serve(callers: int, calls: int, *extra: str, max_concurrency: int = 8) -> dict:
    from http_load import Caller
    from http_load import callers as run_callers
    from serve_subjects import AUTH, CODE, server, server_pid

    async def call(caller: Caller) -> str:
        status, body = await caller.post("/v1/run", CODE)
        if status != 200:
            return f"HTTP {status} {body[:150]!r}"
        out = json.loads(body).get("stdout")
        return out if isinstance(out, str) else f"no stdout: {body[:150]!r}"

    with server("sandbox", max_concurrency, *extra) as url:
        pid = server_pid(url)

        async def go() -> dict:
            warm = Tally()  # every worker's executors started (connections land at random), then the measure
            await run_callers(url, AUTH, [WARM_CALLS] * max(callers, 8, 8 * CORES), call, warm.add)
            tally = Tally()
            h0, m0, w0 = tree_cpu_s(pid), machine_busy_s(), time.monotonic()
            await run_callers(url, AUTH, shares(calls, callers), call, tally.add)
            wall, host_s, machine_s = time.monotonic() - w0, tree_cpu_s(pid) - h0, machine_busy_s() - m0
            return figures(tally, calls, wall, host_s, machine_s)

        return asyncio.run(go())


def serve_workers(callers: int, calls: int) -> dict:
    """``execbox serve --workers auto --max-concurrency <2 x cores, at least
    8>``: a worker process per core, and room for two runs per core (each
    running run holds an executor of its own: more than the cores can run
    costs more than it gives)."""
    return serve(callers, calls, "--workers", "auto", max_concurrency=max(8, 2 * CORES))


SUBJECTS = {
    "floor": floor,
    "shared": shared,
    "per_process": per_process,
    "serve": serve,
    "serve_workers": serve_workers,
}


def main() -> None:
    subject, calls = sys.argv[1], int(sys.argv[2])
    callers = [int(n) for n in sys.argv[3].split(",")]
    report: dict = {"subject": subject, "cells": {}}
    for n in callers:
        print(f"  {subject} x{n} ...", file=sys.stderr)
        try:
            report["cells"][str(n)] = SUBJECTS[subject](n, max(calls, 4 * n))
        except Exception as exc:  # noqa: BLE001 - reported in the table
            report["cells"][str(n)] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    print(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    main()
