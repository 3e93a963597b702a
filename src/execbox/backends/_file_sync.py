"""A local workspace kept in step with copies of it elsewhere (a Ray node's,
an ``execbox serve`` session's): what each copy has had of it, so that a
run sends a copy only what changed since that copy last saw the
workspace, and what the run wrote comes back (``collect``, bounded).

One snapshot per copy (the ray backend's runs may go to any node, and each
node's copy lags behind by what runs elsewhere wrote; the remote backend
has one copy). Links are never sent (what one points to is this
machine's), nor anything that is not a regular file; they are named in
``skipped`` with what did not come back (a link or a folder here where
the other side wrote a file), and what passes ``MAX_PUSHED_BYTES`` in one
run or ``MAX_PULLED_FILES`` / ``MAX_PULLED_BYTES`` back. A file a run
removed elsewhere stays here (a run's report names what it created or
changed, not what it removed).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .._errors import ExecboxError, WorkspaceError
from .._workspace import INTERNAL_DIR, Snapshot, Workspace

__all__ = ["MAX_PULLED_BYTES", "MAX_PULLED_FILES", "MAX_PUSHED_BYTES", "WorkspaceCopies", "collect"]

MAX_PUSHED_BYTES = 256 * 1024 * 1024
# The most one run brings back (the rest stays where it ran, named in ``skipped``).
MAX_PULLED_FILES = 1000
MAX_PULLED_BYTES = 256 * 1024 * 1024


def collect(read: Callable[[str], bytes], paths: Sequence[str]) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of ``paths`` as ``read`` gives them (path → bytes), up to
    ``MAX_PULLED_FILES`` / ``MAX_PULLED_BYTES``, and the paths left out
    (past the bounds, or that ``read`` refused: a link, a folder...)."""
    files: dict[str, bytes] = {}
    skipped: list[str] = []
    size = 0
    for n, path in enumerate(paths):
        if n >= MAX_PULLED_FILES or size >= MAX_PULLED_BYTES:  # a block that made 100k files
            skipped.extend(paths[n:])
            break
        try:
            data = read(path)
        except (ExecboxError, OSError):
            skipped.append(path)
            continue
        files[path] = data
        size += len(data)
    return files, skipped


class WorkspaceCopies:
    """Not thread-safe: the executor calls it under its lock. A copy is
    named by a key (a node's id; the remote backend's one)."""

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
