"""Soak of the docker backend's agent (``tests/_soak.py`` says what a soak
drives and asserts), on runc and on gVisor: bursts from 64 threads of good
blocks beside blocks that time out (1 s), crash, segfault, flood their
output and are cancelled; a block that kills every process of the
container (``kill -9 -1``: its agent with it) runs alone after each burst,
as it takes the blocks running beside it in the one container down with
it. Also: no container, process, descriptor or workspace is left once the
executor closes."""

from __future__ import annotations

import time

import pytest

from execbox import DockerExecutor, Limits
from execbox.backends._watch import DRAIN_GRACE_S
from execbox.backends.docker import _exec, _link
from execbox.backends.docker._container import LABEL_OWNER, owner_label
from tests._soak import FAST, assert_healthy, descendants, fds, soak
from tests.conftest import require, require_docker

TIMEOUT_S = 1.0
# gVisor: a fork costs the agent ~24 ms (runc: ~1.3 ms), so 64 blocks at once keep it busy past a 1 s
# timeout; it gets 16 threads and 3 s (measured: print(1) from its start to its end, p90 2.5 s with
# 64 threads, under 0.5 s with 8)
GVISOR = dict(timeout_s=3.0, threads=16, burst=60 if FAST else 100, rounds=1)
# Longer than every timer of the agent and its link in the full run (an agent
# is stalled after ANSWER_S of silence; pings, drains and kills are shorter);
# the fast run waits past all but ANSWER_S.
GAP_S = (_link.PING_S if FAST else _link.ANSWER_S) + 1.0
assert max(_link.PING_S, DRAIN_GRACE_S, _exec.KILL_TIMEOUT_S) < GAP_S  # (the agent's drain: 2 s)
# A flood's 16 MB reach the host at the pace it reads them (the agent's window): under a burst from
# 64 threads that pace is the GIL's, and the block may time out first, as on a slow terminal
EXPECT = {"flood": lambda r: (r.truncated and r.exit_code == 0) or (r.timed_out and r.exit_code == 124)}


def _release() -> None:
    """The engine client's pooled connections, closed (it opens new ones)."""
    from execbox._docker_engine import docker_client

    docker_client().api.close()


def _ours() -> set[str]:
    """This process's containers, running or not yet removed."""
    from execbox._docker_engine import docker_client

    found = docker_client().containers.list(all=True, filters={"label": f"{LABEL_OWNER}={owner_label()}"})
    return {container.id for container in found}


@pytest.mark.parametrize("runtime", ["runc", "runsc"])
def test_soak(runtime):
    require_docker()
    if runtime == "runsc":
        from execbox._docker_engine import docker_client

        require(
            "gVisor",
            "runsc" in docker_client().info().get("Runtimes", {}),
            "scripts/docker-engine.sh registers runsc with the engine",
        )
    containers, children, before_fds = _ours(), descendants(), fds(_release)
    size = (
        dict(timeout_s=TIMEOUT_S, burst=100 if FAST else 200, rounds=1 if FAST else 2)
        if runtime == "runc"
        else GVISOR
    )
    executor = DockerExecutor(
        runtime=None if runtime == "runc" else runtime, limits=Limits(timeout_s=size["timeout_s"])
    )
    workspace = executor.workspace.path  # its own, temporary: removed by close()
    with executor:
        seen = soak(executor, gap_s=GAP_S, solo=("kill_all",), expect=EXPECT, release=_release, **size)
    print(seen)  # shown with -s, or when an assertion fails
    assert_healthy(seen, rss_growth_mb=192.0)  # the engine client's buffers grow with a flood's 16 MB
    assert not workspace.exists(), "the executor's workspace outlived close()"
    deadline = time.monotonic() + 15  # auto_remove: the engine removes a killed container shortly after
    while _ours() - containers and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _ours() - containers, "a container of the executor outlived close()"
    assert descendants() <= children, "a process of the executor outlived close()"
    assert fds(_release) <= before_fds, "a descriptor of the executor outlived close()"
