"""The remote executor's workspace: a local folder kept in step with the
session's workspace on the server, so that what reads files by path (the
agents, the MCP file tools, the AG2/AutoGen adapters) works unchanged.

Before a run, the files created, changed or removed here since the last
step are sent (PUT / DELETE); after it, the files the run created or
changed there are fetched. Links are never sent (what one points to is
this machine's), nor anything that is not a regular file; a link or a
file the server will not take or hand back is skipped and named in
``skipped``, as is what passes ``MAX_PULLED_FILES`` / ``MAX_PULLED_BYTES``
in one run.
"""

from __future__ import annotations

from typing import Any

from ..._errors import ExecboxError, ServiceError, WorkspaceError
from ..._workspace import Snapshot, Workspace

__all__ = ["MAX_PULLED_BYTES", "MAX_PULLED_FILES", "Mirror"]

# The most one run brings back (the rest stays there, named in ``skipped``).
MAX_PULLED_FILES = 1000
MAX_PULLED_BYTES = 256 * 1024 * 1024


class Mirror:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._synced = Snapshot()
        self.skipped: list[str] = []

    def reset(self) -> None:
        """A new session on the server: everything is sent again."""
        self._synced = Snapshot()

    def push(self, session: Any) -> None:
        now = self.workspace.snapshot()
        for path in Workspace.changes(self._synced, now):
            try:
                data = self.workspace.download(path)  # refuses a link
            except WorkspaceError:
                self.skipped.append(path)
                continue
            try:
                session.upload(path, data)
            except ServiceError as exc:  # refused there (a link the code planted, too big): not the run's end
                if exc.status is None or exc.status >= 500:
                    raise
                self.skipped.append(path)
        for path in set(self._synced) - set(now):
            try:
                session.delete(path)
            except ExecboxError:  # already gone there
                pass
        self._synced = now

    def pull(self, session: Any, paths: tuple[str, ...]) -> None:
        fetched = 0
        for n, path in enumerate(paths):
            if n >= MAX_PULLED_FILES or fetched >= MAX_PULLED_BYTES:  # a block that made 100k files
                self.skipped.extend(paths[n:])
                break
            try:
                data = session.download(path)
                self.workspace.write_bytes(path, data)
            except (ExecboxError, OSError):  # a link there, a folder here...: the run's report still names it
                self.skipped.append(path)
                continue
            fetched += len(data)
        self._synced = self.workspace.snapshot()
