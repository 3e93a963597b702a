"""The ray backend: blocks run on the nodes of a Ray cluster, each node's
worker actor holding a real execbox executor (the sandbox's warm pool by
default; Jupyter, Docker...), behind the same Executor interface.

    >>> with create_executor("ray", address="auto", backend="sandbox") as ex:
    ...     ex.run(CodeBlock("python", "print(1)")).node   # the node that ran it

Each run is admitted first (``_admission.Admission``, one actor for the
cluster): on the least loaded live node with fewer than ``per_node`` runs
(one where this executor already is, among equals), within ``max_runs``
for the whole cluster, else ``ClusterBusyError`` at once with
``retry_after``. A stateless executor's runs go wherever they are admitted;
a stateful one (a Jupyter kernel; or ``pinned=True``: a session whose
workspace lives on its node) stays on the node of its first run for its
life. The run's events stream back as they come (a Ray generator, in
batches of what came within 5 ms); cancelling (a cancelled ``arun``, a
closed stream, ``restart``) kills the block on its node.

The workspace is local: a run sends its node the files that node lacks
(``backends/_file_sync.WorkspaceCopies``) and brings back what the run created or changed
(bounded), so code that reads results by path works unchanged.

A node that dies fails the runs on it with ``NodeLostError`` (retryable:
new runs go to the nodes left); a pinned executor whose node is gone
raises it for every run until ``restart()`` starts it afresh on another.
``close()`` closes this executor's executors on every node it used.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from ..._errors import BackendUnavailableError, ClusterBusyError, ConfigurationError, NodeLostError
from ..._languages import Language, Policy
from ..._models import CodeBlock, ExecutionResult, Limits
from ..._run_events import DisplayEvent, EndEvent, EventSink, OutputEvent, RunEvent, StartEvent
from ..._workspace import Workspace
from .._base import Executor
from .._executor_api import Capabilities
from .._file_sync import WorkspaceCopies
from .._process import Cancellation, OutputCallback
from .._result import Outcome
from ._agent import RunEnd
from ._cluster import cluster

__all__ = ["RayExecutor"]

# How often a run's watcher looks whether it was cancelled.
CANCEL_POLL_S = 0.05
# How long close() waits for the nodes to close this executor's executors.
CLOSE_TIMEOUT_S = 30.0


class RayExecutor(Executor):
    """Runs blocks on a Ray cluster at ``address`` (None: Ray's connection
    in this process, else a new one-node cluster on loopback; ``"auto"``;
    ``"host:port"``; ``"ray://host:port"``), each on an executor of
    ``backend`` made on the node with ``backend_options`` (and this
    executor's limits and policies). ``per_node``: runs one node takes at
    once; ``max_runs``: runs the cluster takes at once (None: per_node ×
    nodes); ``pinned``: keep every run on one node (None: when the
    backend is stateful)."""

    name = "ray"

    def __init__(
        self,
        address: str | None = None,
        *,
        backend: str = "sandbox",
        per_node: int = 8,
        max_runs: int | None = None,
        pinned: bool | None = None,
        workspace: Workspace | str | None = None,
        limits: Limits | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        silence_pip: bool = True,
        keep_code_files: bool = True,
        **backend_options: Any,
    ) -> None:
        super().__init__(
            workspace=workspace,
            limits=limits,
            execution_policies=execution_policies,
            silence_pip=silence_pip,
            keep_code_files=keep_code_files,
        )
        if backend == self.name:
            raise ConfigurationError(
                "the ray backend runs another backend on each node: backend='sandbox', ..."
            )
        if per_node < 1 or (max_runs is not None and max_runs < 1):
            raise ConfigurationError("per_node and max_runs are at least 1 (runs at once)")
        from .. import get_backend

        self._inner = get_backend(backend)  # ConfigurationError for an unknown name, here and now
        self.address = address
        self.backend = backend
        self.per_node = per_node
        self.max_runs = max_runs
        self._options = {
            "limits": self.limits,
            "execution_policies": execution_policies,
            "silence_pip": silence_pip,
            **backend_options,
        }
        self._pinned_option = pinned
        self._capabilities: Capabilities | None = None
        self._key = uuid.uuid4().hex
        self._node: str | None = None  # the node of a pinned executor
        self._used: set[str] = set()  # nodes holding an executor of ours
        self._files = WorkspaceCopies(self.workspace)
        self._sync_lock = threading.Lock()
        self._cluster = cluster()

    def __repr__(self) -> str:
        return (
            f"RayExecutor(address={self.address!r}, backend={self.backend!r}, per_node={self.per_node}, "
            f"limits={self.limits!r})"
        )

    @property
    def capabilities(self) -> Capabilities:
        """The node backend's, as this machine's copy of it says (the nodes
        are taken to be alike)."""
        if self._capabilities is None:
            probe = self._inner(workspace=self.workspace, **self._options)
            try:
                found = probe.capabilities
            finally:
                probe.close()
            self._capabilities = dataclasses.replace(
                found,
                backend=self.name,
                mechanisms={
                    **found.mechanisms,
                    "nodes": f"each node's {self.backend} executor enforces them",
                },
            )
        return self._capabilities

    @property
    def pinned(self) -> bool:
        return self.capabilities.stateful if self._pinned_option is None else self._pinned_option

    @property
    def node(self) -> str | None:
        """The node a pinned executor runs on (None before its first run)."""
        return self._node

    @property
    def files_skipped(self) -> list[str]:
        """Paths not sent to a node or not brought back (links, past the bounds...)."""
        return list(self._files.skipped)

    def _start(self) -> None:
        self._cluster.connect(self.address)

    def _stop(self) -> None:
        """Close this executor's executor on every node it used (a lost
        node has nothing left to close)."""
        ray = _ray()
        with self._sync_lock:
            used, self._used = self._used, set()
            self._files.reset()
            self._node = None
        agents = self._cluster.agents()
        pending = [agents[node].close.remote(self._key) for node in used if node in agents]
        if pending:
            ray.wait(pending, num_returns=len(pending), timeout=CLOSE_TIMEOUT_S)

    def _execute(
        self, language: Language, code_path: str, cancel: Cancellation, on_output: OutputCallback | None
    ) -> Outcome:
        raise NotImplementedError("the ray executor sends whole runs to a node (_run_blocks)")

    def upload(self, path: str, data: bytes | str) -> None:
        """Write a file into the workspace, here and now on every node this
        executor uses (a block that runs there reads it)."""
        raw = data.encode() if isinstance(data, str) else data
        self.workspace.write_bytes(path, raw)
        agents = self._cluster.agents()
        with self._sync_lock:
            used = [node for node in self._used if node in agents]
        _ray().get([agents[node].upload.remote(self._key, path, raw) for node in used])

    # -- a run ----------------------------------------------------------------

    def _run_blocks(self, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink) -> ExecutionResult:
        self.start()
        with self._state_lock:
            self._active.add(cancel)
        run_id = uuid.uuid4().hex
        try:
            node = self._admit(run_id)
            started = time.monotonic()
            try:
                sink.emit(StartEvent(len(blocks)))
                result = self._run_on(node, blocks, run_id, cancel, sink)
            finally:
                self._cluster.admission().release.remote(node, run_id, time.monotonic() - started)
            sink.emit(EndEvent(result, "cancelled" if cancel.is_set() else "completed"))
            return result
        finally:
            with self._state_lock:
                self._active.discard(cancel)

    def _admit(self, run_id: str) -> str:
        ray = _ray()
        with self._sync_lock:
            pinned = self._node if self.pinned else None
            warm = tuple(self._used)
        try:
            status, value = ray.get(
                self._cluster.admission().acquire.remote(run_id, self.per_node, self.max_runs, pinned, warm)
            )
        except self._cluster.ray_errors() as exc:
            raise BackendUnavailableError("ray", f"the cluster's admission actor failed: {exc}") from None
        if status == "busy":
            limit = f"max_runs={self.max_runs}" if self.max_runs is not None else "no max_runs"
            raise ClusterBusyError(
                f"the Ray cluster runs as many blocks as it may (per_node={self.per_node}, "
                f"{limit}): retry after {value} s, or raise per_node",
                retry_after=value,
            )
        if status == "lost":
            raise NodeLostError(
                value,
                f"node {value}, where this {self.backend} executor lived (its state, its "
                "workspace there), left the Ray cluster: restart() the executor to start "
                "afresh on another node, then run again",
            )
        if self.pinned:
            with self._sync_lock:
                self._node = value
        return value

    def _run_on(
        self, node: str, blocks: list[CodeBlock], run_id: str, cancel: Cancellation, sink: EventSink
    ) -> ExecutionResult:
        ray = _ray()
        agent = self._cluster.agent(node)
        with self._sync_lock:
            self._used.add(node)
            files, removed = self._files.outgoing(node)
        spec = {"backend": self.backend, "options": self._options, "keep_code_files": self.keep_code_files}
        done = threading.Event()

        def watch() -> None:  # a cancel becomes the node's cancel of this run
            while not done.wait(CANCEL_POLL_S):
                if cancel.is_set():
                    agent.cancel.remote(run_id)
                    return

        watcher = threading.Thread(target=watch, name="execbox-ray-cancel", daemon=True)
        watcher.start()
        end: RunEnd | None = None
        try:
            for ref in agent.run.options(num_returns="streaming").remote(
                self._key, spec, files, removed, blocks, run_id
            ):
                events = ray.get(ref)
                if events and isinstance(events[-1], RunEnd):
                    end = events.pop()
                _forward(events, sink)
        except self._cluster.ray_errors() as exc:
            with self._sync_lock:
                self._used.discard(node)
                self._files.forget(node)
            raise self._cluster.lost(node, exc, self.backend) from None
        finally:
            done.set()
            watcher.join()
        if end is None:
            raise NodeLostError(node, f"the run on node {node} ended without a result: run again")
        if end.error is not None:
            raise end.error
        with self._sync_lock:
            self._files.incoming(node, end.files)
            self._files.skipped.extend(end.skipped)
        assert end.result is not None
        return dataclasses.replace(end.result, node=node)


def _forward(events: list[RunEvent], sink: EventSink) -> None:
    """A node's events, to this run's sink (output through its callable, so
    that ``on_output`` hears it too)."""
    for event in events:
        if isinstance(event, OutputEvent):
            sink.block = event.block
            sink(event.stream, event.text)
        elif isinstance(event, DisplayEvent):
            sink.block = event.block
            sink.display(event.display)
        else:
            sink.emit(event)


def _ray() -> Any:
    import ray

    return ray
