"""Soak of the sandbox's stateful parts: the warm pool and the stateful
session (``tests/_soak.py`` says what a soak drives and asserts). Also: no
block's cgroup, process or workspace is left once the executor closes."""

from __future__ import annotations

import os
import time

import pytest

from execbox import Limits, SandboxExecutor
from execbox.backends.sandbox import _pool, find_bwrap
from execbox.jail._cgroups import cgroup_support
from tests._soak import FAST, assert_healthy, descendants, soak
from tests.conftest import require

TIMEOUT_S = 2.0
# longer than every timer of the pool (the waits on its zygote) in the full run
GAP_S = 1.0 if FAST else _pool.UNIT_WAIT_S + 1.0


def _groups() -> set[str]:
    support = cgroup_support()[0]
    if support is None:
        return set()
    return {
        f"{base}/{name}"
        for base in set(support.bases.values())
        for name in os.listdir(base)
        if name.startswith("b")
    }


@pytest.mark.parametrize("stateful", [False, True], ids=["pool", "stateful"])
def test_soak(tmp_path, stateful):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    groups, children = _groups(), descendants()
    executor = SandboxExecutor(
        workspace=tmp_path / "ws", stateful=stateful, limits=Limits(timeout_s=TIMEOUT_S)
    )
    with executor:
        # a stateful session runs one block at a time: its burst is smaller, its threads wait their turn
        seen = soak(
            executor,
            timeout_s=TIMEOUT_S,
            gap_s=GAP_S,
            burst=(40 if FAST else 100) if stateful else None,
            call_deadline_s=90.0 if stateful else None,
        )
        health = executor.pool_health
    assert_healthy(seen)
    assert health is not None and health["stalls"] == 0, health
    assert health["boxes"] + health["boxes_asked"] <= 64 and health["boxes_replaced"] == 0, health
    settle_until = time.monotonic() + 15.0  # the cgroup janitor removes groups behind close()
    while (descendants() > children or not _groups() <= groups) and time.monotonic() < settle_until:
        time.sleep(0.25)
    assert descendants() <= children, "a process of the executor outlived close()"
    assert _groups() <= groups, f"cgroups left: {sorted(_groups() - groups)[:3]}"
    assert not (tmp_path / "ws" / ".execbox" / "tmp").exists() or not os.listdir(
        tmp_path / "ws" / ".execbox" / "tmp"
    )
