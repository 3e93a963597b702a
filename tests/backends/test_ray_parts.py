"""The ray backend's parts that run elsewhere, run here directly without a
cluster: the node agent (a plain class; its run is the Ray generator) on
the local backend, and the admission's decisions. The backend on a real
cluster: tests/test_ray_cluster.py."""

from __future__ import annotations

import time
from pathlib import Path

from execbox import CodeBlock, Limits, OutputEvent, Workspace
from execbox.backends._file_sync import WorkspaceCopies
from execbox.backends.ray._admission import Admission
from execbox.backends.ray._agent import NodeAgent, RunEnd

SPEC = {"backend": "local", "options": {"limits": Limits(timeout_s=10)}, "keep_code_files": True}


def _run(agent: NodeAgent, blocks: list[CodeBlock], files: dict | None = None, removed: list | None = None):
    items = list(agent.run("k", SPEC, files or {}, removed or [], blocks, "r1"))
    events = [e for item in items for e in item]
    assert isinstance(events[-1], RunEnd) and not any(isinstance(e, RunEnd) for e in events[:-1])
    return events[:-1], events[-1]


def test_the_agent_runs_with_the_files_sent_and_sends_back_what_the_run_wrote():
    agent = NodeAgent()
    try:
        events, end = _run(
            agent,
            [CodeBlock("python", "print(open('in.txt').read()); open('out.txt', 'w').write('o')")],
            files={"in.txt": b"sent"},
        )
        assert end.error is None and end.result.output == "sent\n"
        assert end.files == {"out.txt": b"o"} and end.skipped == []
        assert "".join(e.text for e in events if isinstance(e, OutputEvent)) == "sent\n"
        assert type(events[0]).__name__ == "BlockStartEvent"  # its StartEvent is the driver's
        events, end = _run(
            agent, [CodeBlock("python", "import os; print(os.path.exists('in.txt'))")], removed=["in.txt"]
        )
        assert end.result.output == "False\n"
        assert agent.keys() == ["k"]
    finally:
        assert agent.close("k")
    assert agent.keys() == []


def test_the_agent_cancels_a_run_by_its_id():
    agent = NodeAgent()
    stream = agent.run(
        "k", SPEC, {}, [], [CodeBlock("python", "print('up', flush=True)\nimport time; time.sleep(60)")], "r1"
    )
    try:
        first = next(stream)
        assert any(isinstance(e, OutputEvent) or type(e).__name__ == "BlockStartEvent" for e in first)
        started = time.monotonic()
        assert agent.cancel("r1")
        end = [e for item in stream for e in item][-1]
        assert isinstance(end, RunEnd) and end.result.exit_code != 0 and time.monotonic() - started < 5
        assert not agent.cancel("r1")  # over
    finally:
        agent.close("k")


def _admission(nodes: list[str]) -> Admission:
    admission = Admission()
    admission._nodes, admission._looked = nodes, time.monotonic() + 3600  # no ray.nodes() here
    return admission


def test_admission_spreads_to_the_least_loaded_then_refuses():
    admission = _admission(["a", "b"])
    placed = [admission.acquire(f"r{i}", 2, None) for i in range(4)]
    assert sorted(node for _, node in placed) == ["a", "a", "b", "b"]
    status, retry_after = admission.acquire("r5", 2, None)
    assert status == "busy" and retry_after > 0
    admission.release(placed[0][1], "r0", 0.25)
    assert admission.acquire("r6", 2, None) == ("ok", placed[0][1])
    assert admission.acquire("r7", 2, None) == ("busy", 0.25)  # the mean duration of runs


def test_admission_prefers_warm_nodes_keeps_max_runs_and_pinned_nodes():
    admission = _admission(["a", "b", "c"])
    assert admission.acquire("r1", 8, None, warm=("c",)) == ("ok", "c")
    assert admission.acquire("r2", 8, 2, pinned="c") == ("ok", "c")
    assert admission.acquire("r3", 8, 2)[0] == "busy"  # max_runs for the whole cluster
    admission.lost("c")
    assert admission.load() == {}  # its runs are gone with it
    assert admission.acquire("r4", 8, None, pinned="c") == ("lost", "c")
    assert admission._looked == 0.0  # it looks at the cluster again at the next call
    admission._looked = time.monotonic() + 3600
    assert admission.acquire("r5", 8, None)[1] in ("a", "b")


def test_node_files_send_each_node_what_it_lacks(tmp_path: Path):
    workspace = Workspace(tmp_path / "ws")
    files = WorkspaceCopies(workspace)
    workspace.write_text("a.txt", "1")
    (workspace.path / "link").symlink_to("/etc/passwd")
    assert files.outgoing("n1") == ({"a.txt": b"1"}, [])
    assert files.skipped == ["link"]  # a link is never sent
    assert files.outgoing("n1") == ({}, [])
    files.incoming("n1", {"b.txt": b"2"})
    assert (workspace.path / "b.txt").read_bytes() == b"2"
    assert files.outgoing("n1") == ({}, [])  # n1 wrote it
    assert files.outgoing("n2")[0] == {"a.txt": b"1", "b.txt": b"2"}  # n2 has seen nothing yet
    workspace.remove("a.txt")
    assert files.outgoing("n1") == ({}, ["a.txt"])


def test_an_agent_that_cannot_be_placed_on_a_node_that_just_left_counts_as_the_node_lost():
    # The admission learns of a removed node within NODES_TTL_S; an agent sent there meanwhile
    # fails with Ray's ActorUnschedulableError, which must read as execbox's NodeLostError.
    import importlib.util

    from tests.conftest import require

    require("ray", importlib.util.find_spec("ray") is not None, "pip install 'execbox[ray]' (./dev.sh does)")
    import ray.exceptions

    from execbox.backends.ray._cluster import Cluster

    assert ray.exceptions.ActorUnschedulableError in Cluster().ray_errors()
