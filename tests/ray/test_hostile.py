"""The hostile battery on the ray backend: what a block run on a node can
reach of Ray and of the other tenants, judged from the host.

A block runs in the node's sandbox (the default backend on each node). It
tries, as an attacker on a shared cluster would: the GCS's TCP port (and
through it every actor and object of every tenant), the node's raylet and
plasma store sockets in Ray's session folder, the object store's shared
memory in ``/dev/shm``, Ray's variables in its environment, the processes
of the node (raylet, gcs_server, the actor's worker), and another tenant's
files in the node's workspace. Each must be out of its reach.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from pathlib import Path

import pytest

from execbox import CodeBlock, Limits
from tests.ray._cluster import ray_executor, shared_cluster

PROBE = r"""
import json, os, socket
GCS, SESSION = {gcs!r}, {session!r}
out = {{}}
host, port = GCS.rsplit(":", 1)
try:
    socket.create_connection((host, int(port)), timeout=2).close()
    out["gcs"] = "connected"
except OSError as exc:
    out["gcs"] = type(exc).__name__
out["sockets"] = {{}}
for name in ("raylet", "plasma_store"):
    path = os.path.join(SESSION, "sockets", name)
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(2)
        s.connect(path)
        out["sockets"][name] = "connected"
    except OSError as exc:
        out["sockets"][name] = type(exc).__name__
out["seen"] = []
for folder in ("/tmp", "/dev/shm", os.path.dirname(SESSION)):
    try:
        out["seen"] += [os.path.join(folder, n) for n in os.listdir(folder)]
    except OSError:
        pass
out["env"] = sorted(k for k in os.environ if "RAY" in k.upper())
cmdlines = []
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                cmdlines.append(f.read(4096).replace(b"\0", b" ").decode("utf-8", "replace"))
        except OSError:
            pass
out["cmdlines"] = cmdlines
print(json.dumps(out))
"""

SEARCH = r"""
import glob, os
MARK, found, seen = {mark!r}, [], 0
stack = [(top, 0) for top in ("/tmp", "/var", "/home", "/root", "/run", "/dev/shm", "/srv", "/opt", "/mnt")]
stack += [(top, 1) for top in glob.glob("/tmp/execbox-*")]  # where a node keeps its workspaces: first
while stack and seen < 50000:
    folder, depth = stack.pop()
    try:
        entries = list(os.scandir(folder))
    except OSError:
        continue
    seen += len(entries)
    found += [e.path for e in entries if MARK in e.name]
    if depth < 12:
        stack += [(e.path, depth + 1) for e in entries if e.is_dir(follow_symlinks=False)]
print("found:", found)
"""


def _session_dir() -> str:
    """Ray's session folder on this machine (the cluster's nodes share it)."""
    return os.path.realpath("/tmp/ray/session_latest")


def _host_copies(mark: str, skip: Path) -> list[str]:
    """The node-side copies of a file named with ``mark`` (the drivers' own, under ``skip``, left out)."""
    found = []
    for workspace in Path(tempfile.gettempdir()).glob("execbox-*"):  # the nodes' temporary workspaces
        for folder, _, files in os.walk(workspace):  # vanishing folders (other tests') are passed over
            if not Path(folder).is_relative_to(skip):
                found += [os.path.join(folder, n) for n in files if mark in n]
    return found


@pytest.mark.parametrize("network", [False, True], ids=["network-off", "network-on"])
def test_a_block_on_a_node_reaches_nothing_of_ray(tmp_path, network):
    """With the network on too: it is the internet through the node's egress
    namespace (jail/_egress.py), never the node's loopback, where the
    GCS listens without authentication (a block that reached it could
    overwrite a pickled class the driver loads)."""
    cluster = shared_cluster()
    session = _session_dir()
    assert os.path.exists(os.path.join(session, "sockets", "raylet")), (
        "the probe's targets must exist on the host"
    )
    executor = ray_executor(tmp_path / "ws", Limits(timeout_s=30, network=network))
    with executor:
        result = executor.run(CodeBlock("python", PROBE.format(gcs=cluster.address, session=session)))
    assert result.ok, result.output
    seen = json.loads(result.output.strip().splitlines()[-1])
    assert seen["gcs"] != "connected", "a block reached the GCS: every actor and object of the cluster"
    assert all(v != "connected" for v in seen["sockets"].values()), seen["sockets"]
    leaked = [p for p in seen["seen"] if "ray" in p.lower() or "plasma" in p.lower()]
    assert not leaked, f"Ray's files are visible to a block: {leaked}"
    assert not seen["env"], f"Ray's variables reach a block: {seen['env']}"
    ray_processes = [
        c
        for c in seen["cmdlines"]
        if any(w in c for w in ("raylet", "gcs_server", "ray::", "default_worker", "plasma"))
    ]
    assert not ray_processes, f"a block sees Ray's processes: {ray_processes}"


def test_a_tenants_files_on_a_node_are_out_of_anothers_reach(tmp_path):
    shared_cluster()
    mark = f"execbox-tenant-{uuid.uuid4().hex}"
    first = ray_executor(tmp_path / "a", Limits(timeout_s=30), pinned=True)
    with first:
        wrote = first.run(CodeBlock("python", f"open('{mark}.txt', 'w').write('secret of tenant a')"))
        assert wrote.ok, wrote.output
        on_host = _host_copies(mark, tmp_path)
        assert on_host, "the first tenant's file must exist on a node for the test to mean anything"
        second = ray_executor(tmp_path / "b", Limits(timeout_s=60), pinned=True)
        with second:
            searched = second.run(CodeBlock("python", SEARCH.format(mark=mark)))
    assert searched.ok, searched.output
    assert "found: []" in searched.output, f"a block found another tenant's file: {searched.output}"
