"""A bounded soak of one executor, as a heavy user drives it: bursts from
64 threads mixing good blocks with blocks that time out, crash, kill their
own unit, flood their output or are cancelled, then idle gaps longer than
the backend's internal timers; then what must hold: every call returned
within its deadline, a CPU-bound block as fast as before (within a stated
tolerance), no descriptor, process or memory left behind.

``EXECBOX_FAST=1`` runs the short version (the fast tier); CI the full one.
Backends differ in a few knobs of ``soak``: kinds run alone (``solo``:
blocks that share one container die with a ``kill -9 -1`` beside them),
checks of their own (``expect``: a kernel reports a crash as its death),
shared pools dropped before descriptors are counted (``release``)."""

from __future__ import annotations

import os
import resource
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from execbox import CodeBlock, EndEvent, Executor, OutputEvent

FAST = os.environ.get("EXECBOX_FAST") == "1"
HEAVY = CodeBlock("python", "s = 0\nfor i in range(200000): s += i * i\nprint(s > 0)")
# what a hostile or unlucky block does, and what its result must say
MIXED: dict[str, tuple[str, str, Callable[[object], bool]]] = {
    "timeout": (
        "python",
        "import time\nprint('start', flush=True)\ntime.sleep(60)",
        lambda r: r.exit_code == 124 and r.output.startswith("start"),
    ),
    "crash": ("python", "import os\nos._exit(3)", lambda r: r.exit_code == 3),
    "segfault": ("python", "import ctypes\nctypes.string_at(0)", lambda r: r.exit_code != 0),
    "kill_all": ("sh", "echo before; kill -9 -1; sleep 5", lambda r: r.exit_code != 0),
    "flood": (
        "python",
        "import sys\nfor _ in range(4096): sys.stdout.write('x' * 4096)",
        lambda r: r.truncated and r.exit_code in (0, 1, 120, 137),
    ),
}


@dataclass
class Soak:
    """What one soak saw."""

    heavy_before_ms: float = 0.0
    heavy_after_ms: float = 0.0
    calls: int = 0
    slowest_s: float = 0.0
    wrong: list[str] = field(default_factory=list)
    fds: tuple[int, int] = (0, 0)
    rss_mb: tuple[float, float] = (0.0, 0.0)
    children: tuple[int, int] = (0, 0)


def heavy_ms(executor: Executor, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        result = executor.run(HEAVY)
        times.append(time.monotonic() - started)
        assert result.output == "True\n", result.output
    return statistics.median(times) * 1000


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fds(release: Callable[[], None] | None = None) -> int:
    """This process's open descriptors, after ``release()`` (which drops
    pools shared beyond one executor, such as the engine client's)."""
    if release is not None:
        release()
    return _fds()


def _rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def descendants() -> int:
    """Processes below this one (jails, containers' clients, kernels)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    parents[int(entry)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    mine, count = {os.getpid()}, 0
    grew = True
    while grew:
        grew = False
        for pid, parent in parents.items():
            if parent in mine and pid not in mine:
                mine.add(pid)
                count += 1
                grew = True
    return count


def _cancelled(executor: Executor) -> bool:
    """A block cancelled once it printed: closing the stream kills it."""
    events = executor.stream(CodeBlock("python", "import time\nprint('go', flush=True)\ntime.sleep(60)"))
    try:
        for event in events:
            if isinstance(event, OutputEvent):
                break
            if isinstance(event, EndEvent):
                return False
    finally:
        events.close()
    return True


def soak(
    executor: Executor,
    *,
    timeout_s: float,
    gap_s: float,
    rounds: int | None = None,
    burst: int | None = None,
    kinds: tuple[str, ...] = tuple(MIXED),
    threads: int = 64,
    call_deadline_s: float | None = None,
    solo: tuple[str, ...] = (),
    expect: dict[str, Callable[[object], bool]] | None = None,
    release: Callable[[], None] | None = None,
) -> Soak:
    """Drive ``executor`` (started, ``Limits.timeout_s`` = ``timeout_s``)
    through ``rounds`` bursts of ``burst`` calls from ``threads`` threads,
    each followed by the ``solo`` kinds one at a time, then an idle gap of
    ``gap_s``. ``call_deadline_s``: the longest a call may take (default:
    its timeout, the kill and the drain; more where calls queue for one
    session). ``expect``: checks that replace MIXED's for some kinds;
    ``release``: called before descriptors are counted."""
    rounds = rounds if rounds is not None else (1 if FAST else 2)
    burst = burst if burst is not None else (160 if FAST else 400)
    checks = {kind: (expect or {}).get(kind, MIXED[kind][2]) for kind in MIXED}
    mixed = tuple(kind for kind in kinds if kind not in solo)
    seen = Soak()
    executor.run(CodeBlock("python", "print(0)"))  # started, its pool or kernel warm
    seen.heavy_before_ms = heavy_ms(executor)
    before_fds, rss, children = fds(release), _rss_mb(), descendants()
    deadline = call_deadline_s or timeout_s + 10.0  # a block's timeout, the kill and the drain, loaded

    def hostile(kind: str) -> tuple[bool, str]:
        language, code, _ = MIXED[kind]
        result = executor.run(CodeBlock(language, code))
        return checks[kind](result), f"{kind}: exit {result.exit_code}, {result.output[-200:]!r}"

    def timed(what: Callable[[], tuple[bool, str]]) -> None:
        started = time.monotonic()
        ok, said = what()
        took = time.monotonic() - started
        seen.slowest_s = max(seen.slowest_s, took)
        if not ok or took > deadline:
            seen.wrong.append(f"{said} ({took:.1f} s)")

    def good(i: int) -> tuple[bool, str]:
        result = executor.run(CodeBlock("python", f"print({i})"))
        return result.output == f"{i}\n", f"print({i}): {result.output[-200:]!r}"

    def call(i: int) -> None:
        slot = i % 20
        if slot < len(mixed):
            timed(lambda: hostile(mixed[slot]))
        elif slot == len(mixed):
            timed(lambda: (_cancelled(executor), "cancelled: ended before its first output"))
        else:
            timed(lambda: good(i))

    for round_ in range(rounds):
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(call, range(burst)))
        seen.calls += burst
        if round_ == 0 and rounds > 1:
            # the growth that counts is the later rounds': the first grows malloc's arenas (one per
            # thread of the burst, more in a fresh process) and the caches once, a leak every round
            rss = _rss_mb()
        for kind in kinds:
            if kind in solo:
                timed(lambda: hostile(kind))  # noqa: B023 - called at once
                seen.calls += 1
        time.sleep(gap_s)
        # after the gap, the first call must not find anything stuck
        started = time.monotonic()
        after_gap = executor.run(CodeBlock("python", "print('after the gap')"))
        if after_gap.output != "after the gap\n" or time.monotonic() - started > deadline:
            seen.wrong.append(f"after the gap: {after_gap.output!r} ({time.monotonic() - started:.1f} s)")
    seen.heavy_after_ms = heavy_ms(executor)
    # what is left once things settle: a process just killed, a descriptor a thread is closing
    after_fds, after_children = fds(release), descendants()
    settle_until = time.monotonic() + 10.0
    while (after_fds > before_fds or after_children > children) and time.monotonic() < settle_until:
        time.sleep(0.25)
        after_fds, after_children = min(after_fds, fds(release)), min(after_children, descendants())
    seen.fds, seen.rss_mb, seen.children = (
        (before_fds, after_fds),
        (rss, _rss_mb()),
        (children, after_children),
    )
    return seen


def assert_healthy(
    seen: Soak, *, rss_growth_mb: float = 64.0, extra_fds: int = 4, extra_children: int = 2
) -> None:
    """What a soak must leave: right answers in time, latency as before
    (twice the before plus 50 ms: a loaded 2-core machine, not a benchmark),
    nothing leaked."""
    assert not seen.wrong, f"{len(seen.wrong)} of {seen.calls} calls wrong or late: {seen.wrong[:5]}"
    assert seen.heavy_after_ms <= 2 * seen.heavy_before_ms + 50, (seen.heavy_before_ms, seen.heavy_after_ms)
    assert seen.fds[1] <= seen.fds[0] + extra_fds, f"descriptors {seen.fds}"
    assert seen.children[1] <= seen.children[0] + extra_children, f"processes below the test {seen.children}"
    assert seen.rss_mb[1] - seen.rss_mb[0] <= rss_growth_mb, f"host RSS {seen.rss_mb} MB"
