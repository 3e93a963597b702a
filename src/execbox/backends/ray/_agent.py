"""The worker on each Ray node: one actor per node (named
``execbox-node-<node id>`` in the ``execbox`` namespace, pinned there),
holding a real execbox executor for each ``RayExecutor`` that runs blocks
on the node (the sandbox's warm pool, a Jupyter kernel, a Docker
container), in a workspace of the node's own.

A run comes with the files to bring the node's workspace up to date (and
the paths to remove), runs on the executor, and streams its events back
as a Ray generator, in batches: what the run reported within
``COALESCE_S`` of the first event goes in one item (a Ray generator item
costs about 0.6 ms here, so ``print(1)``'s five events go in one or two).
The last item ends with a ``RunEnd``: the result and the files the run
created or changed (at most ``_file_sync.MAX_PULLED_FILES`` / ``MAX_PULLED_BYTES``; the
rest named as skipped), after the run's last events (one item fewer). A
threaded actor: runs, cancels and closes come concurrently.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ..._errors import ExecboxError, WorkspaceError
from ..._models import CodeBlock, ExecutionResult
from ..._run_events import EndEvent, EventSink, RunEvent, StartEvent
from ..._workspace import INTERNAL_DIR
from .._base import Executor
from .._file_sync import collect
from .._watch import Cancellation

__all__ = ["COALESCE_S", "NodeAgent", "RunEnd"]

COALESCE_S = 0.005
_DONE = object()


class RunEnd:
    """The last item of a run's stream: its result, the files it wrote, the
    paths not brought back (links, past the bounds), or the infrastructure
    error that ended it (an ``ExecboxError``, raised again by the driver)."""

    def __init__(
        self,
        result: ExecutionResult | None,
        files: dict[str, bytes],
        skipped: list[str],
        error: BaseException | None = None,
    ) -> None:
        self.result = result
        self.files = files
        self.skipped = skipped
        self.error = error


class NodeAgent:
    """The executors of one node, by the key of the driver's executor."""

    def __init__(self) -> None:
        self._executors: dict[str, Executor] = {}
        self._runs: dict[str, Cancellation] = {}
        self._lock = threading.Lock()

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def _executor(self, key: str, spec: Mapping[str, Any]) -> Executor:
        with self._lock:
            executor = self._executors.get(key)
            if executor is None:
                from .. import create_executor

                executor = create_executor(spec["backend"], **spec["options"])  # its own temporary workspace
                self._executors[key] = executor
            return executor

    def run(
        self,
        key: str,
        spec: Mapping[str, Any],
        files: Mapping[str, bytes],
        removed: Sequence[str],
        blocks: list[CodeBlock],
        run_id: str,
    ) -> Iterator[Any]:
        """A Ray generator: lists of events, the last ending with a ``RunEnd``."""
        try:
            executor = self._executor(key, spec)
            executor.keep_code_files = spec["keep_code_files"]  # the driver's may change between runs
            executor.start()
            _apply(executor, files, removed)
        except ExecboxError as exc:
            yield [RunEnd(None, {}, [], exc)]
            return
        events: queue.Queue[Any] = queue.Queue()
        cancel = Cancellation()
        with self._lock:
            self._runs[run_id] = cancel
        outcome: list[Any] = []
        last: list[Any] = []

        def work() -> None:
            try:
                outcome.append(executor._run_blocks(blocks, cancel, EventSink(events.put)))
            except BaseException as exc:  # noqa: BLE001 (sent to the driver, raised there)
                outcome.append(exc)
            finally:
                events.put(_DONE)

        thread = threading.Thread(target=work, name="execbox-ray-run", daemon=True)
        thread.start()
        try:
            for batch, finished in _batches(events):
                if finished:
                    last = batch  # sent with the RunEnd
                else:
                    yield batch
            thread.join()
        finally:
            with self._lock:
                self._runs.pop(run_id, None)
            if thread.is_alive():  # the driver went away mid-run
                cancel.cancel()
                thread.join()
            cancel.close()
        done = outcome[0] if outcome else ExecboxError("the run ended without a result")
        if isinstance(done, BaseException):
            error = done if isinstance(done, ExecboxError) else ExecboxError(f"{type(done).__name__}: {done}")
            yield [*last, RunEnd(None, {}, [], error)]
            return
        wrote = (*done.files, *(f for f in done.code_files if not f.startswith(f"{INTERNAL_DIR}/")))
        pulled, skipped = collect(executor.workspace.download, wrote)  # download refuses a link
        yield [*last, RunEnd(done, pulled, skipped)]

    def cancel(self, run_id: str) -> bool:
        with self._lock:
            cancel = self._runs.get(run_id)
        if cancel is not None:
            cancel.cancel()
        return cancel is not None

    def upload(self, key: str, path: str, data: bytes) -> bool:
        """Write a file into the workspace of ``key``'s executor here, now
        (a block that runs reads it); False when it has none here."""
        with self._lock:
            executor = self._executors.get(key)
        if executor is None:
            return False
        executor.files.write(path, data)  # the jail's identity, a container's user
        return True

    def close(self, key: str) -> bool:
        """Close ``key``'s executor here (its runs stopped, its workspace removed)."""
        with self._lock:
            executor = self._executors.pop(key, None)
        if executor is not None:
            executor.close()
        return executor is not None

    def keys(self) -> list[str]:
        """The executors held here (a closed executor leaves none behind)."""
        with self._lock:
            return sorted(self._executors)


def _batches(events: queue.Queue[Any]) -> Iterator[tuple[list[RunEvent], bool]]:
    """Lists of the run's events: the first that comes, and what follows
    within ``COALESCE_S``; with True for the last. The run's own StartEvent
    and EndEvent stay here (the driver sends its own, with the node)."""
    while True:
        item = events.get()
        batch: list[RunEvent] = []
        while item is not _DONE:
            if not isinstance(item, (StartEvent, EndEvent)):
                batch.append(item)
            try:
                item = events.get(timeout=COALESCE_S)
            except queue.Empty:
                break
        if item is _DONE:
            yield batch, True
            return
        if batch:
            yield batch, False


def _apply(executor: Executor, files: Mapping[str, bytes], removed: Sequence[str]) -> None:
    for path in removed:
        try:
            executor.files.delete(path)
        except WorkspaceError:  # already gone, or a folder the code filled
            pass
    executor.files.write_many(files)  # the jail's identity, a container's user
