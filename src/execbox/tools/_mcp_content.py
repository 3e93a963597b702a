"""What the MCP server's tools hand back as MCP content: a run's text with
its images (``run_content``) and a workspace file (``file_content``). Every
image is read by its bytes, bounded by the run's own output cap and
``MAX_IMAGES`` (security issue 39). Imported by ``execbox.tools.mcp`` once
it has found the MCP SDK."""

from __future__ import annotations

import base64

from mcp_types import ImageContent, TextContent

from .._errors import WorkspaceError
from .._models import ExecutionResult, Limits, one_line
from .._workspace import Workspace
from ._files import MAX_IMAGE_BYTES, as_text, read_at_most, read_bytes
from ._files import image_type as _image_type
from ._files import size_text as _size

__all__ = ["MAX_IMAGES", "file_content", "images", "run_content"]

# Images handed back with one run (displays and image files it wrote).
MAX_IMAGES = 10

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def run_content(
    workspace: Workspace, result: ExecutionResult, limits: Limits
) -> list[TextContent | ImageContent]:
    """The run's text (exit code, output, files), with notes on its images
    and on a timeout, then its images."""
    found, notes = images(workspace, result, limits.max_output_bytes)
    text = result.to_text()
    if result.timed_out:
        notes.insert(
            0,
            f"This server allows {limits.timeout_s:g} s per run "
            "(execbox mcp --timeout S; create_server(timeout_s=...)).",
        )
    if notes:
        text = text.rstrip("\n") + "\n" + "\n".join(notes)
    return [TextContent(type="text", text=text), *found]


def file_content(workspace: Workspace, path: str) -> list[TextContent | ImageContent]:
    """A workspace file: UTF-8 text as text, an image as image content,
    another binary file as its size and kind only."""
    data = read_bytes(workspace, path)
    mime = _image_type(data)
    if mime is not None:
        return [
            TextContent(type="text", text=f"{path}: {mime} image, {_size(len(data))}"),
            ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime),
        ]
    text = as_text(path, data)
    if text is None:
        return [
            TextContent(
                type="text",
                text=f"{path} is a binary file ({_size(len(data))}, not UTF-8 text): "
                "not shown. Use run_code to inspect it.",
            )
        ]
    return [TextContent(type="text", text=text)]


def images(
    workspace: Workspace, result: ExecutionResult, budget: int
) -> tuple[list[ImageContent], list[str]]:
    """Image content for the run's image displays, then for the image files
    it wrote; notes on what was left out. The images of one run come to at
    most ``budget`` bytes (the run's ``Limits.max_output_bytes``) and
    ``MAX_IMAGES``: like its text, what a run hands back is bounded by its
    own cap (security issue 39), and no file is read past what is left."""
    candidates: list[tuple[str, str | None]] = []  # (label, workspace path or None for inline data)
    # a label is a name the block chose, for lines of the text the model reads: escaped (one_line)
    inline: dict[str, str] = {}
    for index, display in enumerate(result.displays):
        if display.mime_type not in _IMAGE_TYPES:  # SVG and HTML stay files, named in the output
            continue
        if display.path is not None:
            candidates.append((one_line(display.path), display.path))
        elif display.data is not None:
            label = f"inline image {index + 1}"
            inline[label] = display.data
            candidates.append((label, None))
    shown = {path for _, path in candidates if path is not None}
    candidates += [
        (one_line(f), f) for f in result.files if f.lower().endswith(_IMAGE_SUFFIXES) and f not in shown
    ]

    budget_all = budget
    found: list[ImageContent] = []
    sent: list[str] = []
    notes: list[str] = []
    for position, (label, path) in enumerate(candidates):
        if len(found) >= MAX_IMAGES:
            rest = [lbl for lbl, _ in candidates[position:]]
            notes.append(
                f"{len(rest)} more images not returned (at most {MAX_IMAGES} per run; read_file "
                f"shows one): {', '.join(rest)}"
            )
            break
        most = min(MAX_IMAGE_BYTES, budget)
        try:
            if path is not None:
                data = _load_image(workspace, path, most)
            else:
                data = base64.b64decode(inline[label]) if len(inline[label]) <= most * 4 // 3 + 4 else None
        except (WorkspaceError, OSError, ValueError) as exc:
            notes.append(f"Image {label} not returned: {exc}")
            continue
        if data is None or len(data) > most:
            why = (
                f"it is more than {_size(MAX_IMAGE_BYTES)}"
                if most == MAX_IMAGE_BYTES
                else f"the images of one run take at most Limits.max_output_bytes={_size(budget_all)} "
                f"in all ({_size(budget)} left); read_file shows one"
            )
            notes.append(f"Image {label} not returned: {why}.")
            continue
        mime = _image_type(data)
        if mime is None:
            notes.append(f"Image {label} not returned: not a PNG, JPEG, GIF or WebP image.")
            continue
        budget -= len(data)
        found.append(ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime))
        sent.append(label)
    if sent:
        notes.insert(0, "Images returned below: " + ", ".join(sent))
    return found, notes


def _load_image(workspace: Workspace, path: str, most: int) -> bytes | None:
    """At most ``most`` bytes of a file the run wrote (still growing,
    maybe, by what it left running), never through a link; None when it holds more."""
    data = read_at_most(workspace, path, most)
    return None if len(data) > most else data
