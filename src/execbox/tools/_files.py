"""The workspace's files as a model reads and writes them, shared by the MCP
server's file tools and the agents' (``file_tools``). Paths are relative
to the workspace; one that leads outside it is refused (``PathEscapeError``).

    tools = file_tools(executor.workspace)   # list_files, read_file, write_file
"""

from __future__ import annotations

import os
import stat
from typing import Any

from .._errors import WorkspaceError
from .._models import one_line
from .._nofollow import lstat_under, read_under
from .._workspace import Workspace
from ._function_tool import FunctionTool

__all__ = [
    "MAX_IMAGE_BYTES",
    "MAX_LISTED",
    "MAX_TEXT_BYTES",
    "file_tools",
    "image_type",
    "list_text",
    "read_at_most",
    "read_bytes",
    "size_text",
    "write_text",
]

# Largest image returned as image content (a common limit of model APIs).
MAX_IMAGE_BYTES = 5 * 1024 * 1024
# Largest text file read_file returns.
MAX_TEXT_BYTES = 1024 * 1024
# Entries list_files shows.
MAX_LISTED = 500


def list_text(workspace: Workspace, path: str) -> str:
    """The files and folders under ``path``, recursively, with their sizes;
    names as ``one_line`` writes them (a name a block chose, with a newline,
    must not forge an entry)."""
    if path not in (".", ""):
        found = lstat_under(workspace.path, _parts(workspace, path), path)
        if found is None:
            raise WorkspaceError(f"no folder {path!r} in the workspace: list_files('.') shows what there is")
        if stat.S_ISLNK(found.st_mode):
            return f"{one_line(path)} is a link (execbox does not follow links)"
        if not stat.S_ISDIR(found.st_mode):
            return f"{one_line(path)} is a file ({size_text(found.st_size)})"
    entries = workspace.list(path or ".")
    if not entries:
        return "The workspace is empty." if path in (".", "") else f"{one_line(path)} is an empty folder."
    lines = [
        f"{one_line(e.path)}/" if e.is_dir else f"{one_line(e.path)}  ({size_text(e.size)})"
        for e in entries[:MAX_LISTED]
    ]
    if len(entries) > MAX_LISTED:
        lines.append(f"... and {len(entries) - MAX_LISTED} more (list a sub-folder to see them)")
    return "\n".join(lines)


def read_bytes(workspace: Workspace, path: str, limit: int = MAX_IMAGE_BYTES) -> bytes:
    """A file's bytes, refused for a folder or a file bigger than ``limit``.
    Never more than ``limit + 1`` bytes are read: a block still running may
    grow the file after any look at its size. Links are not followed."""
    data = read_at_most(workspace, path, limit)
    if len(data) > limit:
        raise WorkspaceError(
            f"{path!r} is more than {size_text(limit)}; read_file returns text up to "
            f"{size_text(MAX_TEXT_BYTES)} and images up to {size_text(MAX_IMAGE_BYTES)}: "
            "run code to read a part of it"
        )
    return data


def read_at_most(workspace: Workspace, path: str, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the file (more than ``limit``: too big),
    its folders and itself opened without following links."""
    return read_under(workspace.path, _parts(workspace, path), path, limit)


def _parts(workspace: Workspace, path: str) -> tuple[str, ...]:
    """``path``'s names under the workspace (refused if it leads outside);
    the workspace itself is ()."""
    return workspace.resolve(path).relative_to(workspace.path).parts


def as_text(path: str, data: bytes) -> str | None:
    """The file as UTF-8 text, or None for a binary file; too long is refused."""
    if len(data) > MAX_TEXT_BYTES:
        raise WorkspaceError(
            f"{path!r} is {size_text(len(data))}; read_file returns text files up to "
            f"{size_text(MAX_TEXT_BYTES)}: run code to read a part of it"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return None if "\0" in text else text


def write_text(workspace: Workspace, path: str, content: str) -> str:
    saved = workspace.write_text(path, content)
    relative = os.path.relpath(saved, workspace.path)
    return f"Wrote {size_text(len(content.encode('utf-8')))} to {one_line(relative)}."


def image_type(data: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WebP image, by its first bytes."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def size_text(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    if n < 1024 * 1024:
        return f"{n / 1024:.1f} KiB"
    return f"{n / (1024 * 1024):.1f} MiB"


def file_tools(workspace: Workspace | Any) -> list[FunctionTool]:
    """``list_files``, ``read_file`` and ``write_file`` on a workspace (or an
    executor's), as tools for ``AssistantAgent``. A path the model gets wrong
    comes back as the call's text, for the model to fix."""
    space: Workspace = getattr(workspace, "workspace", workspace)

    def list_files(path: str = ".") -> str:
        """List the files and folders under a workspace folder, recursively, with their sizes.

        Args:
            path: a folder relative to the workspace; '.' is all of it.
        """
        return _answer(lambda: list_text(space, path))

    def read_file(path: str) -> str:
        """Read a text file of the workspace (UTF-8, up to 1 MiB).

        Args:
            path: a file relative to the workspace.
        """

        def read() -> str:
            data = read_bytes(space, path)
            mime = image_type(data)
            if mime is not None:
                return f"{path} is a {mime} image ({size_text(len(data))}): not text."
            text = as_text(path, data)
            return (
                text if text is not None else f"{path} is a binary file ({size_text(len(data))}): not shown."
            )

        return _answer(read)

    def write_file(path: str, content: str) -> str:
        """Write a text file into the workspace, replacing it if it exists; folders are made.

        Args:
            path: where to write, relative to the workspace.
            content: the text to write (UTF-8).
        """
        return _answer(lambda: write_text(space, path, content))

    tools = [FunctionTool(list_files), FunctionTool(read_file), FunctionTool(write_file)]
    for tool in tools:
        tool.workspace_path = str(space.path)  # how a saved agent finds them again
    return tools


def _answer(work: Any) -> str:
    try:
        return work()
    except (WorkspaceError, OSError) as exc:
        return f"Error: {exc}"
