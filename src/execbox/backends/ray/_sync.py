"""The ray executor's workspace: a local folder, with what each node's copy
has had of it, so that a run sends its node only what changed since that
node last saw the workspace, and brings back what the run wrote.

One snapshot per node (a run may go to any node, and each node's
workspace lags behind by what runs elsewhere wrote). Links are never
sent (what one points to is this machine's), nor anything that is not a
regular file; they are named in ``skipped`` with what did not come back
(a link or a folder here where the node wrote a file), and what passes
``MAX_PUSHED_BYTES`` in one run. A file a run removed on a node stays
here (the run's report names what it created or changed, not what it
removed), as with the remote executor.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..._errors import WorkspaceError
from ..._workspace import INTERNAL_DIR, Snapshot, Workspace

__all__ = ["MAX_PUSHED_BYTES", "NodeFiles"]

MAX_PUSHED_BYTES = 256 * 1024 * 1024


class NodeFiles:
    """Not thread-safe: the executor calls it under its lock."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._synced: dict[str, Snapshot] = {}
        self.skipped: list[str] = []

    def reset(self) -> None:
        """The nodes' executors are new: everything is sent again."""
        self._synced.clear()

    def forget(self, node: str) -> None:
        self._synced.pop(node, None)

    def outgoing(self, node: str) -> tuple[dict[str, bytes], list[str]]:
        """The files ``node`` lacks (path → bytes) and the paths it has that
        are gone here; from now on ``node`` counts as having them."""
        before = self._synced.get(node, Snapshot())
        now = self.workspace.snapshot()
        removed = sorted(path for path in before if path not in now)
        files: dict[str, bytes] = {}
        size = 0
        for path in Workspace.changes(before, now):
            if path.startswith(f"{INTERNAL_DIR}/"):
                continue
            try:
                data = self.workspace.download(path)  # refuses a link
            except (WorkspaceError, OSError):
                self.skipped.append(path)
                continue
            if size + len(data) > MAX_PUSHED_BYTES:
                self.skipped.append(path)
                now.pop(path, None)  # sent with a later run, when there is room
                continue
            files[path] = data
            size += len(data)
        self._synced[node] = now
        return files, removed

    def incoming(self, node: str, files: Mapping[str, bytes]) -> None:
        """Write what a run on ``node`` wrote; ``node`` has those versions."""
        written = []
        for path, data in files.items():
            try:
                self.workspace.write_bytes(path, data)
            except (WorkspaceError, OSError):  # a link or a folder here: the run's report still names it
                self.skipped.append(path)
                continue
            written.append(path)
        now = self.workspace.snapshot()
        synced = self._synced.setdefault(node, Snapshot())
        for path in written:
            if path in now:
                synced[path] = now[path]
