"""The ray backend's faults and admission on a real cluster: a node killed
mid-run fails only the runs on it (NodeLostError, retryable) and new runs
go to the nodes left; a pinned executor whose node is gone says so until
restarted; a burst past the limits is refused at once (ClusterBusyError
with retry_after); nothing is left behind on the nodes."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import ray

from execbox import ClusterBusyError, CodeBlock, Limits, NodeLostError
from tests.conftest import marked, wait_dead
from tests.ray._cluster import NODE, ray_executor, shared_cluster

SLEEPER = "import sys, time\nprint('up', flush=True)\ntime.sleep(6)  # {marker}\nprint('done')\n"


def _admission():
    from execbox.backends.ray._cluster import cluster

    return cluster().admission()


def _leftovers(nodes: list[str]) -> dict[str, list[str]]:
    """The executors each live node's agent still holds."""
    from execbox.backends.ray._cluster import cluster

    agents = cluster().agents()
    return {n: ray.get(agents[n].keys.remote()) for n in nodes if n in agents}


def test_a_killed_node_fails_only_its_runs(tmp_path):
    cluster = shared_cluster()
    survivors = [n["NodeID"] for n in ray.nodes() if n["Alive"]]
    doomed = cluster.add_node(**NODE)
    cluster.wait_for_nodes()
    doomed_id = doomed.node_id
    marker = f"execbox-ray-{uuid.uuid4().hex}"

    # a pinned executor (its workspace is its node's) made to land on the doomed node:
    # the other nodes hold a run each, so it is the least loaded
    admission = _admission()
    for n in survivors:
        assert ray.get(admission.acquire.remote(f"hold-{n}", 4, None, n)) == ("ok", n)
    pinned = ray_executor(tmp_path / "pinned", Limits(timeout_s=30), pinned=True, per_node=4)
    first = pinned.run(CodeBlock("python", "open('state.txt', 'w').write('kept'); print('here')"))
    assert first.output == "here\n" and first.node == doomed_id == pinned.node
    for n in survivors:
        admission.release.remote(n, f"hold-{n}")

    # six runs, two per node (per_node=2, the least loaded first), each sleeping
    executor = ray_executor(tmp_path / "ws", Limits(timeout_s=30), per_node=2)
    up = threading.Semaphore(0)
    outcomes: dict[int, object] = {}

    def call(i: int) -> None:
        def seen(stream: str, text: str) -> None:
            if "up" in text:
                up.release()

        try:
            outcomes[i] = executor.run(
                CodeBlock("python", SLEEPER.replace("{marker}", marker)), on_output=seen
            )
        except Exception as exc:  # noqa: BLE001 - the outcome under test
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for _ in range(6):
        assert up.acquire(timeout=60), "the six runs never all started"
    assert ray.get(admission.load.remote()) == {n: 2 for n in (*survivors, doomed_id)}
    killed = time.monotonic()
    cluster.remove_node(doomed, allow_graceful=False)  # a crash: the raylet and its workers SIGKILLed
    for t in threads:
        t.join(timeout=60)

    lost = [o for o in outcomes.values() if isinstance(o, NodeLostError)]
    ran = [o for o in outcomes.values() if not isinstance(o, Exception)]
    assert len(lost) == 2 and len(ran) == 4, outcomes
    for error in lost:
        assert error.node == doomed_id and error.retryable
        assert doomed_id in str(error) and "left the Ray cluster" in str(error) and "run again" in str(error)
    assert all(r.output == "up\ndone\n" and r.node in survivors for r in ran)
    assert time.monotonic() - killed < 15

    # the pinned executor's node is gone: it says so, and restart() starts it afresh elsewhere
    with pytest.raises(NodeLostError, match="restart"):
        pinned.run(CodeBlock("python", "print(open('state.txt').read())"))
    pinned.restart()
    again = pinned.run(CodeBlock("python", "print('again')"))
    assert again.output == "again\n" and again.node in survivors

    # new runs go to the nodes left
    results = [executor.run(CodeBlock("python", f"print({i})")) for i in range(4)]
    assert [r.output for r in results] == [f"{i}\n" for i in range(4)]
    assert all(r.node in survivors for r in results)

    # nothing left behind: no process of the runs, no executor held by a node, no slot taken
    executor.close()
    pinned.close()
    assert wait_dead(marked(marker), timeout=10) == []
    assert _leftovers(survivors) == {n: [] for n in _leftovers(survivors)}
    assert ray.get(admission.load.remote()) == {}


def test_a_burst_past_the_limit_is_refused_at_once(tmp_path):
    shared_cluster()
    executor = ray_executor(tmp_path / "ws", Limits(timeout_s=30), per_node=4, max_runs=1)
    try:
        executor.run(CodeBlock("python", "import time; time.sleep(0.2)"))  # a duration to base retry_after on
        holder: list = []
        thread = threading.Thread(
            target=lambda: holder.append(
                executor.run(CodeBlock("python", "import time; print('long', flush=True); time.sleep(3)"))
            )
        )
        thread.start()
        deadline = time.monotonic() + 30
        while not ray.get(_admission().load.remote()) and time.monotonic() < deadline:
            time.sleep(0.05)
        started = time.monotonic()
        with pytest.raises(ClusterBusyError) as caught:
            executor.run(CodeBlock("python", "print('second')"))
        assert time.monotonic() - started < 1.0  # refused, not queued
        assert caught.value.retryable and 0.1 < caught.value.retry_after < 30
        assert "max_runs=1" in str(caught.value) and "retry after" in str(caught.value)
        thread.join(timeout=30)
        assert holder and holder[0].output == "long\n"
        assert executor.run(CodeBlock("python", "print('after')")).output == "after\n"  # the slot came back
    finally:
        executor.close()


def test_a_stateful_backend_stays_on_its_node(tmp_path):
    """A Jupyter kernel keeps its variables: the executor is pinned to the
    node of its first run, where the kernel lives."""
    import importlib.util

    from tests.conftest import require

    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    shared_cluster()
    executor = ray_executor(tmp_path / "ws", Limits(timeout_s=60), backend="jupyter", kernel="local")
    try:
        assert executor.pinned
        first = executor.run(CodeBlock("python", "x = 41"))
        second = executor.run(CodeBlock("python", "print(x + 1)"))
        assert second.output == "42\n" and second.node == first.node == executor.node
    finally:
        executor.close()
