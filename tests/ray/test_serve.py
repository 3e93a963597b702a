"""``execbox serve --ray ADDRESS`` on a real cluster (inside the ray tests'
network namespace): a stateless run goes to a node and says which; a
session is pinned to one node, and when that node is lost the session
answers 410 with the reason ``node_lost`` (never a hang, never a bare 404)."""

from __future__ import annotations

import time

import ray

from tests.ray._cluster import NODE, shared_cluster
from tests.server._http import error_of, open_session, running_server


def _hold(nodes: list[str]) -> None:
    from execbox.backends.ray._cluster import cluster

    admission = cluster().admission()
    for n in nodes:  # one run's slot on each: the next session lands on the node left free
        assert ray.get(admission.acquire.remote(f"hold-{n}", 8, None, n)) == ("ok", n)


def _release(nodes: list[str]) -> None:
    from execbox.backends.ray._cluster import cluster

    admission = cluster().admission()
    for n in nodes:
        admission.release.remote(n, f"hold-{n}")


def test_serve_on_the_cluster_and_a_session_whose_node_is_lost():
    cluster = shared_cluster()
    with (
        running_server("--ray", cluster.address, "--backend", "sandbox") as server,
        server.client(timeout=120) as client,
    ):
        ran = client.post("/v1/run", json={"code": "print(6 * 7)"})
        assert ran.status_code == 200, ran.text
        alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert ran.json()["stdout"] == "42\n" and ran.json()["node"] in alive

        survivors = sorted(alive)
        doomed = cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        _hold(survivors)
        try:
            sid = open_session(client)["id"]
            first = client.post(
                f"/v1/sessions/{sid}/executions", json={"code": "open('kept', 'w').write('1')"}
            )
            assert first.status_code == 200 and first.json()["result"]["node"] == doomed.node_id, first.text
        finally:
            _release(survivors)
        cluster.remove_node(doomed, allow_graceful=False)  # a crash

        deadline = time.monotonic() + 30
        while True:  # Ray notices within a second or so; until then the run may still be tried
            after = client.post(f"/v1/sessions/{sid}/executions", json={"code": "print(open('kept').read())"})
            if after.status_code == 410 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        error = error_of(after, 410, "session_expired")
        assert error["reason"] == "node_lost" and "node" in error["message"], error
        assert error_of(client.get(f"/v1/sessions/{sid}"), 410, "session_expired")["reason"] == "node_lost"

        again = client.post("/v1/run", json={"code": "print('still serving')"})  # on the nodes left
        assert again.status_code == 200 and again.json()["stdout"] == "still serving\n"
        assert again.json()["node"] in survivors
