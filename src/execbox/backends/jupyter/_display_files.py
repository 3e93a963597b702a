"""Where the files of a Jupyter block's displays (images, HTML) are saved.

By default in the workspace's ``outputs/`` folder. ``output_dir`` (the
option of AG2's and AutoGen's Jupyter executors) puts them in a folder of
the user's: a relative path is taken from the current directory, as theirs
take it. A folder inside the workspace is written through the workspace
(never through a link the code planted), and its files are named
workspace-relative like every path of a result; a folder outside it is
written here, by the host, and its files are named by absolute path. The
kernel never writes them: it sends the data, the host decodes and saves.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ..._errors import WorkspaceError
from ..._workspace import Workspace

__all__ = ["OUTPUT_DIR", "DisplayFiles"]

OUTPUT_DIR = "outputs"


class DisplayFiles:
    """Saves display files for one executor: ``save(name, data)`` returns
    the path a result names (workspace-relative, or absolute outside it)."""

    def __init__(self, workspace: Workspace, output_dir: str | os.PathLike[str] | None = None) -> None:
        self.workspace = workspace
        self.folder: Path | None = None  # outside the workspace
        self.relative = OUTPUT_DIR  # inside it
        if output_dir is not None:
            chosen = Path(os.path.abspath(Path(output_dir).expanduser()))
            root = workspace.path
            if chosen == root or root in chosen.parents:
                self.relative = os.path.relpath(chosen, root)
            else:
                self.folder = chosen

    def __repr__(self) -> str:
        return f"DisplayFiles({str(self.folder or self.workspace.path / self.relative)!r})"

    def save(self, name: str, data: bytes) -> str:
        if self.folder is None:
            relative = os.path.normpath(os.path.join(self.relative, name))
            self.workspace.write_bytes(relative, data)
            return relative
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(target, flags, 0o644)
        except OSError as exc:
            raise WorkspaceError(
                f"cannot write {str(target)!r} (JupyterExecutor(output_dir=...)): {exc.strerror}"
            ) from None
        with os.fdopen(fd, "wb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise WorkspaceError(f"{str(target)!r} is not a regular file: not written")
            handle.write(data)
        return str(target)
