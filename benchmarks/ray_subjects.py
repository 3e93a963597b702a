"""Benchmark worker for the ray backend, run by ray_table.py inside a
network namespace of its own with only ``lo`` (``unshare -n``: nothing of
Ray listens off loopback). One real cluster (``ray.cluster_utils.Cluster``,
nodes of 1 CPU each), grown from 1 to 3 nodes. Prints one JSON line.

- Floors: Ray's own call overhead, an empty actor method (``ray.get`` of
  one call) and a one-item Ray generator from an actor on another node
  than the driver's; the admission's ``acquire`` (the per-run cost of
  admission control; its release is not waited for).
- Latency of ``print(1)``, each output checked: the sandbox executor in
  this process (the same backend each node runs) and the ray backend on
  it, one after the other in the same run; overhead = the difference.
- Throughput with 1, 2 and 3 nodes: CALLERS threads on one ray executor
  (``per_node`` = CALLERS, so a node could take them all; the admission
  spreads them to the least loaded) until CALLS correct runs; the sandbox
  executor in this process beside it. A ``ClusterBusyError`` is counted
  and retried after its ``retry_after``.

Usage: python ray_subjects.py ITERATIONS CALLS
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time
from collections.abc import Callable

CALLERS = 8
WARMUP = 10
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}


def figures(times: list[float], wrong: int) -> dict:
    ordered = sorted(times)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000,
        "n": len(ordered),
        "wrong": wrong,
    }


def latency(call: Callable[[], object], iterations: int, expect: object = None) -> dict:
    for _ in range(WARMUP):
        call()
    times, wrong = [], 0
    for _ in range(iterations):
        started = time.perf_counter()
        got = call()
        times.append(time.perf_counter() - started)
        wrong += expect is not None and got != expect
    return figures(times, wrong)


def throughput(run: Callable[[], str], calls: int) -> dict:
    from execbox import ClusterBusyError

    lock = threading.Lock()
    counts = {"correct": 0, "wrong": 0, "busy": 0, "left": calls}

    def worker() -> None:
        while True:
            with lock:
                if counts["left"] <= 0:
                    return
                counts["left"] -= 1
            while True:
                try:
                    output = run()
                    break
                except ClusterBusyError as exc:
                    with lock:
                        counts["busy"] += 1
                    time.sleep(exc.retry_after)
            with lock:
                counts["correct" if output == "1\n" else "wrong"] += 1

    warm = [
        threading.Thread(target=run) for _ in range(CALLERS)
    ]  # at once: spread, every node's executor made
    for t in warm:
        t.start()
    for t in warm:
        t.join()
    threads = [threading.Thread(target=worker) for _ in range(CALLERS)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.perf_counter() - started
    return {
        "runs_per_s": counts["correct"] / took,
        "n": calls,
        "wrong": counts["wrong"],
        "busy": counts["busy"],
    }


def main() -> None:
    iterations, calls = int(sys.argv[1]), int(sys.argv[2])
    import ray
    from ray.cluster_utils import Cluster
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from execbox import CodeBlock, SandboxExecutor, create_executor
    from execbox.backends.ray._admission import NODES_TTL_S
    from execbox.backends.ray._cluster import cluster as execbox_cluster

    report: dict = {"callers": CALLERS}
    started = time.monotonic()
    cluster = Cluster(initialize_head=True, head_node_args={**NODE, "include_dashboard": False})
    cluster.wait_for_nodes()
    ray.init(address=cluster.address, namespace="execbox", _node_ip_address="127.0.0.1")
    report["cluster_start_s"] = time.monotonic() - started
    block = CodeBlock("python", "print(1)")
    try:
        # Ray's floor, to an actor on a node other than the driver's
        other = cluster.add_node(**NODE)
        cluster.wait_for_nodes()

        @ray.remote(num_cpus=0)
        class Echo:
            def ping(self) -> int:
                return 1

            def one(self):  # type: ignore[no-untyped-def]
                yield 1

        echo = Echo.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(other.node_id, soft=False)
        ).remote()
        report["ray_call"] = latency(lambda: ray.get(echo.ping.remote()), iterations * 4, 1)
        report["ray_generator"] = latency(
            lambda: [ray.get(r) for r in echo.one.options(num_returns="streaming").remote()],
            iterations * 4,
            [1],
        )
        admission = execbox_cluster().admission()
        ids = iter(range(10**9))

        def admit() -> object:
            n = next(ids)
            status, node = ray.get(admission.acquire.remote(f"b{n}", 10**6, None))
            admission.release.remote(node, f"b{n}")
            return status

        report["admission"] = latency(admit, iterations * 4, "ok")
        ray.kill(echo)
        cluster.remove_node(other)
        # Until its node list is older than NODES_TTL_S the admission can still
        # send a run to the node just removed, and that run then fails
        # (ActorUnschedulableError placing the node's agent): wait it out, the
        # node seen dead first.
        while any(n["NodeID"] == other.node_id and n.get("Alive") for n in ray.nodes()):
            time.sleep(0.1)
        time.sleep(2 * NODES_TTL_S)

        with (
            SandboxExecutor() as local,
            create_executor("ray", address=cluster.address, per_node=CALLERS) as remote,
        ):
            report["sandbox_print"] = latency(lambda: local.run(block).output, iterations, "1\n")
            report["ray_print"] = latency(lambda: remote.run(block).output, iterations, "1\n")
            report["sandbox_throughput"] = throughput(lambda: local.run(block).output, calls)
        curve = []
        for nodes in (1, 2, 3):
            if nodes > 1:
                cluster.add_node(**NODE)
                cluster.wait_for_nodes()
            with create_executor("ray", address=cluster.address, per_node=CALLERS) as remote:
                entry = throughput(lambda: remote.run(block).output, calls)
            entry["nodes"] = nodes
            curve.append(entry)
        report["curve"] = curve
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
