"""What a burst of clients leaves a server holding (issue 42, item 2): a
stateless request's sandbox executor keeps one box, not a pool of four, so
64 clients at once do not leave 64 executors of four warm units each."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.conftest import require_namespaces, wait_dead
from tests.server._http import descendants, running_server


def test_a_burst_of_clients_leaves_one_box_per_kept_executor():
    require_namespaces()
    with running_server("--backend", "sandbox", "--max-concurrency", "32") as server:
        headers = {"Authorization": f"Bearer {server.token}"}

        def run(i: int) -> str:
            with httpx.Client(timeout=120) as client:
                answer = client.post(f"{server.url}/v1/run", json={"code": f"print({i})"}, headers=headers)
                return answer.json()["stdout"]

        with ThreadPoolExecutor(32) as threads:
            outputs = list(threads.map(run, range(192)))
        assert outputs == [f"{i}\n" for i in range(192)]
        pools = httpx.get(f"{server.url}/v1/info", headers=headers).json()["pools"]
        kept = [pool["health"] for pool in pools if pool["backend"] == "sandbox"]
        assert kept, pools
        # each executor kept holds one box (its spares, if a batch made any, go after 5 s unused)
        assert all(health["size"] == 1 for health in kept), kept
        processes = descendants(server.proc.pid)
        # per executor: bwrap twice, the zygote's waiter and the zygote, and per box its init and
        # its next block's process: six; four boxes each were twelve
        assert len(processes) <= 6 * len(kept) + 8, (len(processes), len(kept))
    wait_dead(processes, timeout=10)
