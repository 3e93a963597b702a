"""The driver's side of the Ray cluster: the connection (on loopback when
execbox starts the cluster itself), the named actors (one ``NodeAgent`` per
node, the ``Admission``), and Ray's exceptions turned into execbox's.

Every actor is named in the ``execbox`` namespace and found again with
``get_if_exists``, so executors of one process share them; they belong to
the driver that made them and end with it (none is detached: nothing is
left on the cluster when the program ends). A ``NodeAgent`` is pinned to
its node (``NodeAffinitySchedulingStrategy``, not soft) and takes no CPU
(``num_cpus=0``): the admission, not Ray's scheduler, says how many runs a
node takes.

A node started here listens on loopback only: ``_node_ip_address=
"127.0.0.1"`` (Ray otherwise finds its address by "connecting" to
8.8.8.8:53 and may pick eth0's) and no dashboard.
"""

from __future__ import annotations

import threading
from typing import Any

from ..._errors import BackendUnavailableError, NodeLostError, install_hint

__all__ = ["NAMESPACE", "Cluster", "cluster"]

NAMESPACE = "execbox"
ADMISSION = "execbox-admission"
AGENT_PREFIX = "execbox-node-"
HEAD_RESOURCE = "node:__internal_head__"  # Ray gives it to the head node alone
# Runs, cancels and closes one node agent takes at once (threads, made as needed).
AGENT_CONCURRENCY = 256
_LOOPBACK = ("127.0.0.1", "localhost")


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise BackendUnavailableError("ray", f"Ray is not installed: {install_hint('ray')}") from None
    return ray


class Cluster:
    """The Ray connection of this process and the actors found on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._agents: dict[str, Any] = {}
        self._admission: Any = None
        self.address: str | None = None

    def connect(self, address: str | None) -> None:
        """Connect (once per process): ``None`` starts a one-node cluster
        on loopback unless Ray is already connected; ``"auto"`` the cluster
        of ``ray start`` here; ``"host:port"`` or ``"ray://host:port"`` one
        elsewhere."""
        ray = _ray()
        with self._lock:
            if ray.is_initialized():
                return
            options: dict[str, Any] = {"namespace": NAMESPACE}
            if address is None:
                options.update(_node_ip_address="127.0.0.1", include_dashboard=False)
            elif not address.startswith("ray://") and address.rsplit(":", 1)[0] in _LOOPBACK:
                options["_node_ip_address"] = "127.0.0.1"
            try:
                ray.init(address=address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise BackendUnavailableError(
                    "ray",
                    f"cannot connect to a Ray cluster at {address or '(a new local one)'}: {exc} "
                    "(address=None starts one here, 'auto' finds `ray start`'s)",
                ) from None
            self.address = address

    def admission(self) -> Any:
        with self._lock:
            if self._admission is None:
                from ._admission import Admission

                # on the head node (its GCS gone, the cluster is gone): it outlives any other node
                self._admission = (
                    _ray()
                    .remote(Admission)
                    .options(
                        name=ADMISSION,
                        namespace=NAMESPACE,
                        get_if_exists=True,
                        num_cpus=0,
                        resources={HEAD_RESOURCE: 0.001},
                    )
                    .remote()
                )
            return self._admission

    def agent(self, node: str) -> Any:
        with self._lock:
            handle = self._agents.get(node)
            if handle is None:
                ray = _ray()
                from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

                from ._agent import NodeAgent

                handle = (
                    ray.remote(NodeAgent)
                    .options(
                        name=AGENT_PREFIX + node,
                        namespace=NAMESPACE,
                        get_if_exists=True,
                        num_cpus=0,
                        max_concurrency=AGENT_CONCURRENCY,
                        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
                    )
                    .remote()
                )
                self._agents[node] = handle
            return handle

    def agents(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._agents)

    def alive(self, node: str) -> bool:
        return any(n["NodeID"] == node and n.get("Alive") for n in _ray().nodes())

    def lost(self, node: str, exc: BaseException, backend: str) -> NodeLostError:
        """The error for a run on ``node`` that Ray failed with ``exc``; the
        node's agent is forgotten (made again if the node is alive)."""
        with self._lock:
            self._agents.pop(node, None)
        if self.alive(node):
            why = f"the execbox worker on node {node} died ({type(exc).__name__})"
        else:
            why = f"node {node} left the Ray cluster"
            try:
                self.admission().lost.remote(node)
            except Exception:  # noqa: BLE001 - the admission sees it itself within NODES_TTL_S
                pass
        return NodeLostError(
            node,
            f"{why} while it ran this {backend} run: its output is lost; "
            "run again (it goes to the nodes left)",
        )

    def ray_errors(self) -> tuple[type[BaseException], ...]:
        """Ray's exceptions that mean a node or its worker was lost.
        ActorUnschedulableError: the admission chose a node that had just
        left (it learns of a removal within NODES_TTL_S), so the node's agent
        could not be placed; seen by the benchmark after it removed a node."""
        exceptions = _ray().exceptions
        return tuple(
            getattr(exceptions, name)
            for name in (
                "RayActorError",
                "ObjectLostError",
                "OwnerDiedError",
                "NodeDiedError",
                "WorkerCrashedError",
                "ActorUnschedulableError",
            )
            if hasattr(exceptions, name)
        )


_CLUSTER = Cluster()


def cluster() -> Cluster:
    """The process's one ``Cluster`` (Ray's connection is per process)."""
    return _CLUSTER
