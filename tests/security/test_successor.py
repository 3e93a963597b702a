"""Successors: a block finds no trace of the block before it on the same
executor, nor of a block of another executor (issue 41: a pooled block may
run in a box reused from block to block, cleaned between them).

Each test: block A, on executor E, leaves a trace and checks with the probe
that it sees the trace itself (the probe works: ``PLANTED`` items must be
``FOUND`` in A; a plant the jail refuses is ``REFUSED``, also fine); then
the next block on E and a block on a second executor E2 (its own workspace)
run the probe and must find nothing. The pool runs with ``pool_size=1``, so
the next block lands where A ran. By design a stateful session keeps what
its process and jail hold between its own blocks (``restart()`` is its clean
point), and the workspace is shared by the blocks of one executor.
"""

from __future__ import annotations

import time
import uuid
from contextlib import ExitStack

import pytest

from execbox import CodeBlock, Executor, SandboxExecutor, Workspace
from tests.security._successor_blocks import (
    ARM_TIMERS,
    CLOSE_MINE,
    FIRED,
    HOLD_DESCRIPTORS,
    LIST_DESCRIPTORS,
    SETUP,
    TRACES,
    code,
)
from tests.security.conftest import LIMITS, REQUIRES, premise_problem

pytestmark = pytest.mark.timeout(120)

# the battery's sandbox modes; the pool with one unit ahead, so the next block runs where A ran
FACTORIES = {
    "pool": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, pool_size=1),
    "oneshot": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, pool=False),
    "stateful": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, stateful=True, pool_size=1),
    "landlock": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, isolation="landlock"),
}
# the traces a stateful session keeps between its own blocks by design: its interpreter's state,
# its /tmp and /dev/shm, the IPC namespace of its jail
KEPT_BY_SESSION = frozenset({"files", "sysv", "mqueue", "posix-shm", "environment", "python", "attributes"})


@pytest.fixture(params=sorted(FACTORIES))
def mode(request) -> str:
    return request.param


@pytest.fixture
def pair(mode, tmp_path, tmp_path_factory):
    """Two started executors of ``mode`` with workspaces of their own."""
    REQUIRES[mode]()
    problem = premise_problem(mode, tmp_path_factory)
    if problem:
        pytest.skip(f"{mode} fails the premise (see test_executor.py): {problem}")
    with ExitStack() as stack:
        yield [stack.enter_context(FACTORIES[mode](Workspace(tmp_path / n), LIMITS)) for n in ("e", "e2")]


def _run(executor: Executor, source: str) -> str:
    result = executor.run(CodeBlock("python", source))
    assert result.exit_code == 0 and not result.timed_out, result.output
    assert result.output.rstrip().endswith("CHECKED"), result.output
    return result.output


def _said(output: str, word: str) -> list[str]:
    return [line.split(" ", 1)[1] for line in output.splitlines() if line.startswith(word + " ")]


def _marker() -> str:
    return uuid.uuid4().hex[:14]  # fits a comm (15 bytes)


@pytest.mark.as_user  # as a user who is not root, every executor's jails are that one user's
@pytest.mark.parametrize("trace", sorted(TRACES))
def test_the_next_block_finds_no_trace(mode, pair, trace):
    executor, other = pair
    plant, probe = TRACES[trace]
    setup, marker = SETUP.get(trace, ""), _marker()
    first = _run(executor, code(mode, marker, setup, plant, probe))
    planted, found = _said(first, "PLANTED"), _said(first, "FOUND")
    assert planted or _said(first, "REFUSED"), first
    # the probe works: block A sees each trace it left
    assert not [item for item in planted if not any(f.split()[0] == item for f in found)], first
    said = [line for line in first.splitlines() if line.startswith(("PLANTED ", "REFUSED "))]
    after = _run(executor, code(mode, marker, setup, probe, said=said))
    beside = _run(other, code(mode, marker, setup, probe, said=said))
    assert _said(beside, "FOUND") == [], f"a block of another executor found block A's traces:\n{beside}"
    if mode == "stateful" and trace in KEPT_BY_SESSION:
        return  # the session keeps them by design until restart()
    assert _said(after, "FOUND") == [], f"the next block found block A's traces:\n{after}\nA said:\n{first}"


def test_the_next_block_has_a_fresh_blocks_descriptors(mode, pair):
    """Compared with the first block of a fresh executor, not a list written here."""
    executor, other = pair
    marker = _marker()
    fresh = _said(_run(other, code(mode, marker, LIST_DESCRIPTORS)), "FD")
    first = _run(executor, code(mode, marker, HOLD_DESCRIPTORS, LIST_DESCRIPTORS, CLOSE_MINE))
    assert [f for f in _said(first, "FOUND") if f.startswith("descriptor 77 ")], first
    assert set(_said(first, "FD")) > set(fresh), (first, fresh)  # the listing sees what A opened
    after = _run(executor, code(mode, marker, LIST_DESCRIPTORS))
    beside = _run(other, code(mode, marker, LIST_DESCRIPTORS))
    assert _said(beside, "FD") == fresh, f"another executor's block holds more:\n{beside}\nfresh:\n{fresh}"
    assert _said(after, "FD") == fresh, f"the next block holds more:\n{after}\nfresh:\n{fresh}"


def test_timers_of_a_block_never_fire(mode, pair):
    executor, other = pair
    marker = _marker()
    first = _run(executor, code(mode, marker, ARM_TIMERS))
    assert "PLANTED timer" in first, first
    time.sleep(3)  # past both timers: a bound, not a measure (a slow machine only hides a late one)
    after = _run(executor, code(mode, marker, FIRED))
    beside = _run(other, code(mode, marker, FIRED))
    assert _said(after, "FOUND") == [] and _said(beside, "FOUND") == [], (after, beside)
    for workspace in (executor.workspace.path, other.workspace.path):
        assert not [p.name for p in workspace.iterdir() if p.name in (marker + "-alarm", marker + "-itimer")]


def test_the_workspace_is_the_executors_own(mode, pair):
    """Shared by the blocks of one executor (documented), by no other."""
    executor, other = pair
    marker = _marker()
    leave = 'open(MARK + ".txt", "w").write("left")\n'
    _run(executor, code(mode, marker, leave))
    there = str(executor.workspace.path / f"{marker}.txt")
    look = (
        f"for path in (MARK + '.txt', {there!r}):\n    try:\n        say('FOUND', path, open(path).read(64))\n"
        "    except OSError:\n        pass\n"
    )
    assert "FOUND" in _run(executor, code(mode, marker, look))  # the same executor's next block sees it
    beside = _run(other, code(mode, marker, look))
    assert _said(beside, "FOUND") == [], beside
    assert not (other.workspace.path / f"{marker}.txt").exists()
