"""``executor.files``: an executor's workspace as its blocks own it.

A file the host writes after the executor started is the host's: where
blocks run as another identity (the sandbox's jail id, a container's
user), a block could read it but not rewrite or remove it. Writing through
``executor.files`` hands what it wrote to the blocks' identity at once
(``Executor.give_to_blocks``), so no caller has to remember to.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from .._workspace import FileInfo, Workspace

__all__ = ["ExecutorFiles"]


class _Owner(Protocol):
    """What of an executor the facet uses (``Executor`` has both; no import
    of it here, which imports this module)."""

    workspace: Workspace

    def give_to_blocks(self, paths: Iterable[str]) -> None: ...


class ExecutorFiles:
    """Read, write, list and delete the files of ``executor``'s workspace
    (paths relative to it; none may leave it, none is followed through a
    link)."""

    def __init__(self, executor: _Owner) -> None:
        self._executor = executor

    def __repr__(self) -> str:
        return f"<files of {self._executor!r}>"

    def read(self, path: str) -> bytes:
        return self._executor.workspace.download(path)

    def write(self, path: str, data: bytes | str) -> Path:
        """Write ``data`` (text as UTF-8) at ``path``, the folders on the
        way made; the blocks' to rewrite. The file's host path."""
        return self.write_many({path: data})[0]

    def write_many(self, files: Mapping[str, bytes | str]) -> list[Path]:
        """Write each path's data, then hand them all to the blocks at once."""
        workspace = self._executor.workspace
        written = [
            workspace.write_bytes(path, data.encode("utf-8") if isinstance(data, str) else data)
            for path, data in files.items()
        ]
        self._executor.give_to_blocks(list(files))
        return written

    def list(self, path: str = ".") -> list[FileInfo]:
        """Files and folders under ``path``, recursively (execbox's own left out)."""
        return self._executor.workspace.list(path)

    def delete(self, path: str) -> None:
        """Remove a file, a link or an empty folder (``WorkspaceError`` if none)."""
        self._executor.workspace.remove(path)
