"""The remote executor's workspace: a local folder kept in step with the
session's workspace on the server (one copy of ``_file_sync``'s kind), so
that what reads files by path (the agents, the MCP file tools, the
AG2/AutoGen adapters) works unchanged.

Before a run, the files created, changed or removed here since the server
last saw them are sent (PUT / DELETE); after it, the files the run created
or changed there are fetched (bounded). Links are never sent, nor what is
not a regular file; a file the server will not take (a link the code
planted there, too big) or hand back is skipped and named in ``skipped``.
"""

from __future__ import annotations

from typing import Any

from ..._errors import ExecboxError, ServiceError
from ..._workspace import Workspace
from .._file_sync import WorkspaceCopies, collect

__all__ = ["Mirror"]

SERVER = "server"  # the one copy


class Mirror:
    def __init__(self, workspace: Workspace) -> None:
        self._copies = WorkspaceCopies(workspace)

    @property
    def skipped(self) -> list[str]:
        return self._copies.skipped

    def reset(self) -> None:
        """A new session on the server: everything is sent again."""
        self._copies.reset()

    def push(self, session: Any) -> None:
        files, removed = self._copies.outgoing(SERVER)
        for path, data in files.items():
            try:
                session.upload(path, data)
            except ServiceError as exc:  # refused there (a link the code planted, too big): not the run's end
                if exc.status is None or exc.status >= 500:
                    raise
                self.skipped.append(path)
        for path in removed:
            try:
                session.delete(path)
            except ExecboxError:  # already gone there
                pass

    def pull(self, session: Any, paths: tuple[str, ...]) -> None:
        files, skipped = collect(session.download, paths)  # the server refuses to hand out a link
        self.skipped.extend(skipped)
        self._copies.incoming(SERVER, files)
