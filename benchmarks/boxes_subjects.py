"""Benchmark worker for the boxes group (issue 41): the subjects the other
groups' workers do not measure already. Prints one JSON line (run by
boxes_table.py, a process per subject).

Subjects:
- ``paced``: ``print(1)`` on the warm pool (``SandboxExecutor`` at its
  defaults, subjects.py's), one caller, an idle pause (subjects.PACE_S)
  before each call; ITERATIONS timed calls after a warm-up;
- ``stateful``: ``x = 1`` on ``SandboxExecutor(stateful=True)`` (the
  Jupyter group's subject, jupyter_subjects.py), ITERATIONS timed calls;
- ``ipykernel``: ``x = 1`` on a raw local ipykernel, driven by
  ``jupyter_client`` directly (no executor): the peer of ``stateful``;
- ``memcg``: BLOCKS pooled ``print(1)`` on one executor from CALLERS
  threads, the memory cgroups the kernel counts read before, every
  BLOCKS / SAMPLES blocks, and after the executor closed: the ``memory``
  row of /proc/cgroups (``num_cgroups``: live and dying) and, on cgroup v2,
  ``nr_dying_descendants`` of /sys/fs/cgroup/cgroup.stat.

Usage: python boxes_subjects.py SUBJECT ITERATIONS|BLOCKS
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable

import jupyter_subjects
import subjects
from scale_subjects import threads

WARMUP = 5
POOL_SIZE = 4  # SandboxExecutor's default, named so the table's bound can say it
CALLERS = POOL_SIZE  # no more blocks in flight than the pool holds: the bound is the pool's
SAMPLES = 50  # reads of the counts during the run
SETTLE_S = 2.0  # after close, before the last read: removal is asynchronous


def paced(iterations: int) -> dict:
    with subjects.CLEANUP:
        run = subjects.execbox_sandbox_pool()
        return subjects.latency(run, "python", "print(1)", "1", iterations, pause_s=subjects.PACE_S)


def raw_ipykernel() -> tuple[Callable[[str], str], Callable[[], None]]:
    """A local ipykernel and jupyter_client's blocking client: what an
    executor adds nothing to."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3")

    def run(code: str) -> str:
        out: list[str] = []

        def hook(message: dict) -> None:
            if message["msg_type"] == "stream":
                out.append(message["content"]["text"])

        client.execute_interactive(code, timeout=30, output_hook=hook)
        return "".join(out)

    def close() -> None:
        client.stop_channels()
        manager.shutdown_kernel(now=True)

    return run, close


def x1(make: jupyter_subjects.Make, iterations: int) -> dict:
    """The median of ``x = 1`` round trips on one kept session; its state checked after."""
    run, close = make()
    try:
        for _ in range(WARMUP):
            run("x = 1")
        samples = []
        for _ in range(iterations):
            began = time.perf_counter()
            run("x = 1")
            samples.append((time.perf_counter() - began) * 1000)
        return {**jupyter_subjects.ms(samples), "n": iterations, "correct": run("print(x)").strip() == "1"}
    finally:
        close()


def memcgs() -> dict:
    """``num_cgroups`` of the memory controller (/proc/cgroups) and, on
    cgroup v2, the root's ``nr_dying_descendants`` (None where absent)."""
    found: dict = {"num_cgroups": None, "nr_dying_descendants": None}
    with open("/proc/cgroups") as table:
        for line in table:
            fields = line.split()
            if fields and fields[0] == "memory":
                found["num_cgroups"] = int(fields[2])
    try:
        with open("/sys/fs/cgroup/cgroup.stat") as stat:
            for line in stat:
                name, _, value = line.partition(" ")
                if name == "nr_dying_descendants":
                    found["nr_dying_descendants"] = int(value)
    except OSError:
        pass  # cgroup v1: no such file
    return found


def memcg(blocks: int) -> dict:
    import execbox

    block = execbox.CodeBlock("python", "print(1)")
    every = max(1, blocks // SAMPLES)
    start, during, wrong, first_wrong = memcgs(), [], 0, None
    started = time.monotonic()
    with execbox.SandboxExecutor(pool_size=POOL_SIZE) as executor:
        done = 0
        while done < blocks:
            tally = threads(CALLERS, min(every, blocks - done), lambda: executor.run(block).stdout)
            done += min(every, blocks - done)
            wrong += tally.wrong
            first_wrong = first_wrong or tally.first_wrong
            during.append(memcgs())
            if wrong and wrong == done:
                raise RuntimeError(f"every block went wrong: {first_wrong}")
    wall = time.monotonic() - started
    time.sleep(SETTLE_S)
    out = {
        "blocks": blocks,
        "every": every,
        "pool_size": POOL_SIZE,
        "callers": CALLERS,
        "wall_s": wall,
        "wrong": wrong,
        "start": start,
        "during": during,
        "end": memcgs(),
    }
    if first_wrong:
        out["first_wrong"] = first_wrong
    return out


def measure(subject: str, n: int) -> dict:
    if subject == "paced":
        return paced(n)
    if subject == "stateful":
        return x1(jupyter_subjects.execbox_sandbox_stateful, n)
    if subject == "ipykernel":
        return x1(raw_ipykernel, n)
    if subject == "memcg":
        return memcg(n)
    raise ValueError(f"no subject {subject!r}")


def main() -> None:
    subject, n = sys.argv[1], int(sys.argv[2])
    report: dict = {"subject": subject}
    try:
        report.update(measure(subject, n))
    except Exception as exc:  # noqa: BLE001 - the row says why
        report["error"] = subjects.describe(exc)
    print(json.dumps(report))


if __name__ == "__main__":
    main()  # run as a script: its folder is on sys.path, so the other workers import
