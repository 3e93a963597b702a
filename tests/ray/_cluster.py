"""The Ray cluster of the ray tests: a real multi-node cluster on this
machine (``ray.cluster_utils.Cluster``: a head and a worker node of one CPU
each, more added by a test), one per test process, started at first use and
shut down at exit.

It runs only inside a network namespace of its own that has nothing but
``lo`` (``tests/test_ray_cluster.py`` runs these tests in a child pytest
under ``unshare -n``, which sets ``EXECBOX_RAY_NETNS=1``): Ray finds its
own address by "connecting" to 8.8.8.8:53, and a driver has reported eth0's
address even when told 127.0.0.1; with only ``lo`` nothing of it can listen
anywhere else. Node death is noticed within a second (health checks every
200 ms, three missed).
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import pytest

IN_NAMESPACE = os.environ.get("EXECBOX_RAY_NETNS") == "1"
OUTSIDE = "the ray tests run in a network namespace of their own: tests/test_ray_cluster.py runs them"
NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1"}
HEAD = {
    **NODE,
    "include_dashboard": False,
    "_system_config": {
        "health_check_period_ms": 200,
        "health_check_failure_threshold": 3,
        "health_check_initial_delay_ms": 0,
    },
}

_clusters: list[Any] = []


def shared_cluster() -> Any:
    """The process's cluster (two nodes), the driver connected to it."""
    if not IN_NAMESPACE:
        pytest.skip(OUTSIDE)
    if not _clusters:
        import ray
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args=HEAD)
        cluster.add_node(**NODE)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, namespace="execbox", _node_ip_address="127.0.0.1")
        _clusters.append(cluster)
        atexit.register(_shutdown, cluster)
    return _clusters[0]


def _shutdown(cluster: Any) -> None:
    import ray

    ray.shutdown()
    cluster.shutdown()


def ray_executor(workspace: Any, limits: Any, **options: Any) -> Any:
    """A ray executor (sandbox on each node) on the shared cluster."""
    from execbox import create_executor
    from execbox.backends.sandbox import find_bwrap
    from tests.conftest import require

    cluster = shared_cluster()
    require(
        "bubblewrap",
        find_bwrap() is not None,
        "the ray tests run the sandbox on each node: apt-get install bubblewrap (./dev.sh does)",
    )
    options.setdefault("per_node", 16)
    return create_executor("ray", address=cluster.address, workspace=workspace, limits=limits, **options)
