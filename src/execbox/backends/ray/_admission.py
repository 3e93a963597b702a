"""Admission control for the ray backend: one actor per cluster (named
``execbox-admission`` in the ``execbox`` namespace) that counts the runs
under way on every node and admits a run, on the least loaded node, or
refuses it at once with how long to wait ("busy, retry after") rather than
letting a burst queue into timeouts.

Why an actor and not Ray's own resources: a task that asks for a custom
resource waits in Ray's queue until one is free (no "try"), and a
threaded actor's calls are never scheduled by resources at all; the
refusal, the node choice and the per-node count need one place that
decides. It costs one actor call per run (about 0.9 ms on this machine,
measured by ``benchmarks/ray_subjects.py``); the release is sent without
waiting for it.

Its calls run one at a time (a plain actor), so its state needs no lock.
The nodes it admits to are the cluster's live nodes (``ray.nodes()``,
looked at most every ``NODES_TTL_S``), less those a driver reported lost.
"""

from __future__ import annotations

import collections
import random
import time
from typing import Any

__all__ = ["NODES_TTL_S", "Admission"]

NODES_TTL_S = 1.0
# The slowest a refused caller is told to come back, and the quickest.
MAX_RETRY_AFTER_S = 30.0
MIN_RETRY_AFTER_S = 0.01


class Admission:
    """The counts of runs by node, and the decision on each new run."""

    def __init__(self) -> None:
        self._running: dict[str, dict[str, str]] = {}  # node -> {run id: node}
        self._lost: set[str] = set()
        self._nodes: list[str] = []
        self._looked = 0.0
        self._durations: collections.deque[float] = collections.deque(maxlen=64)

    def _alive(self) -> list[str]:
        now = time.monotonic()
        if now - self._looked > NODES_TTL_S:
            import ray

            self._nodes = [n["NodeID"] for n in ray.nodes() if n.get("Alive")]
            self._looked = now
        return [n for n in self._nodes if n not in self._lost]

    def acquire(
        self,
        run_id: str,
        per_node: int,
        max_runs: int | None,
        pinned: str | None = None,
        warm: tuple[str, ...] = (),
    ) -> tuple[str, Any]:
        """``("ok", node)``: run ``run_id`` there (and ``release`` it after);
        ``("busy", seconds)``: nothing free, come back then; ``("lost",
        node)``: the pinned node is gone. Among the least loaded nodes, one
        in ``warm`` (where the caller's executor already is) is preferred."""
        alive = self._alive()
        if pinned is not None and pinned not in alive:
            self._looked = 0.0  # a node that joins again (same id) is seen at the next call
            return ("lost", pinned)
        load = {n: len(self._running.get(n, ())) for n in ([pinned] if pinned else alive)}
        total = sum(len(runs) for runs in self._running.values())
        free = [n for n, count in load.items() if count < per_node]
        if not free or (max_runs is not None and total >= max_runs):
            return ("busy", self._retry_after())
        node = min(free, key=lambda n: (load[n], n not in warm, random.random()))
        self._running.setdefault(node, {})[run_id] = node
        return ("ok", node)

    def release(self, node: str, run_id: str, duration_s: float | None = None) -> None:
        self._running.get(node, {}).pop(run_id, None)
        if duration_s is not None:
            self._durations.append(duration_s)

    def lost(self, node: str) -> None:
        """A driver saw ``node`` die: admit nothing there from now on."""
        self._lost.add(node)
        self._running.pop(node, None)

    def load(self) -> dict[str, int]:
        """The runs under way, by node (for tests and the benchmark)."""
        return {n: len(runs) for n, runs in self._running.items() if runs}

    def _retry_after(self) -> float:
        """The mean duration of recent runs: about when a slot comes free."""
        if not self._durations:
            return 1.0
        mean = sum(self._durations) / len(self._durations)
        return min(MAX_RETRY_AFTER_S, max(MIN_RETRY_AFTER_S, round(mean, 3)))
