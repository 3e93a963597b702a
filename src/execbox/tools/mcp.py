"""An MCP server that runs code with execbox, built on the official ``mcp``
SDK (2.x, execbox's ``mcp`` extra: ``execbox._errors.install_hint``).

    execbox mcp                                   # stdio, the sandbox backend
    execbox mcp --transport http --port 8765      # streamable HTTP at /mcp

or from Python::

    from execbox.tools.mcp import create_server, serve
    serve(create_server(backend="local", workspace="work"), transport="http", port=8765)

Tools: ``run_code``, ``list_files``, ``read_file``, ``write_file``,
``reset_session``. One executor serves every call of the server process: it
is made at the first call and closed when the server stops. Files go through
the executor's ``Workspace``, so a path that leads outside it is refused.

How failures come back:

- the model's code failed (non-zero exit code, exception, timeout,
  unsupported language): a normal result, ``isError`` not set; the text
  starts ``exitcode: N (execution failed)`` and carries the traceback;
- a bad request the model can fix (a path outside the workspace, no such
  file, a file too big): a tool result with ``isError`` set and the reason;
- the infrastructure failed (the backend is unavailable, the executor
  cannot start): an MCP protocol error (``MCPError``, JSON-RPC -32603) whose
  message names the backend and what to change.
"""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from .._errors import ConfigurationError, ExecboxError, WorkspaceError, install_hint
from .._gpus import check_gpu_backend, parse_gpus
from .._models import CodeBlock, ExecutionResult, Limits, one_line
from .._version import __version__
from .._workspace import Workspace
from ..backends import DEFAULT_BACKEND, Executor, get_backend
from ._files import MAX_IMAGE_BYTES, MAX_TEXT_BYTES, as_text, list_text, read_at_most, read_bytes, write_text
from ._files import image_type as _image_type
from ._files import size_text as _size
from ._progress import run_reporting


def _missing_sdk(exc: ImportError) -> ImportError:
    try:
        from importlib.metadata import version

        found = version("mcp")
    except Exception:  # noqa: BLE001 - only for the message
        found = None
    if found is None:
        problem = "the mcp package is not installed"
    elif found.split(".")[0] == "1":
        problem = f"mcp {found} is installed (1.x has no mcp.server.mcpserver)"
    else:
        problem = f"importing it failed ({exc})"
    return ImportError(
        f"execbox.tools.mcp needs the MCP Python SDK 2.x and {problem}: {install_hint('mcp')}",
        name="mcp",
    )


try:
    import anyio
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INTERNAL_ERROR, CallToolResult, ImageContent, TextContent, ToolAnnotations
    from pydantic import Field
except ImportError as _exc:  # mcp missing or 1.x
    raise _missing_sdk(_exc) from _exc

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_TEXT_BYTES", "create_server", "serve"]

# Images handed back with one run (displays and image files it wrote).
MAX_IMAGES = 10

_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".gif", ".webp")
_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})

Transport = Literal["stdio", "http"]


def create_server(
    *,
    backend: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    timeout_s: float | None = None,
    executor_factory: Callable[[], Executor] | None = None,
    name: str = "execbox",
    gpus: object = None,
) -> MCPServer:
    """An MCP server (``mcp.server.mcpserver.MCPServer``) with execbox's tools.

    - ``backend``: where code runs (default: ``"sandbox"``); see
      ``execbox.backend_names()``.
    - ``workspace``: the folder the code and the file tools work in (created
      if missing, kept afterwards); default: a temporary one, removed when
      the server stops.
    - ``timeout_s``: wall-clock seconds per ``run_code`` call (default 60).
    - ``gpus``: NVIDIA GPUs the code may use (sandbox and docker: "all",
      indices or UUIDs; ``execbox._gpus``).
    - ``executor_factory``: instead of the four above, a callable that
      returns the executor to use (any backend options, limits...).

    Options are checked here; the executor is made at the first tool call.
    """
    if executor_factory is not None:
        given = [
            n
            for n, v in (
                ("backend", backend),
                ("workspace", workspace),
                ("timeout_s", timeout_s),
                ("gpus", gpus),
            )
            if v is not None
        ]
        if given:
            raise ConfigurationError(
                f"create_server() takes executor_factory or {', '.join(given)}, not both: "
                "set them on the executor the factory returns"
            )
        factory = executor_factory
    else:
        backend_class = get_backend(backend or DEFAULT_BACKEND)
        limits = Limits() if timeout_s is None else Limits(timeout_s=timeout_s)
        folder = Workspace(workspace) if workspace is not None else None
        wanted = parse_gpus(gpus)
        if wanted is not None:
            check_gpu_backend(backend_class.name)
        extra: dict[str, Any] = {"gpus": wanted} if wanted is not None else {}

        def factory() -> Executor:
            return backend_class(workspace=folder, limits=limits, **extra)

    holder = _ExecutorHolder(factory)

    @asynccontextmanager
    async def lifespan(_: MCPServer) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await holder.close()

    server: MCPServer = MCPServer(
        name,
        version=__version__,
        instructions=(
            "Runs code in execbox and returns its output, exit code and images. Files persist in one "
            "workspace between calls; paths are relative to it. Use run_code, then list_files / read_file "
            "to look at what the code produced."
        ),
        log_level="WARNING",
        lifespan=lifespan,
    )
    _add_tools(server, holder)
    return server


def serve(
    server: MCPServer,
    *,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
) -> None:
    """Serve until the client goes away (stdio) or the process is stopped
    (HTTP: Ctrl-C or SIGTERM). The executor is closed on the way out."""
    if transport == "stdio":
        server.run("stdio")
    elif transport == "http":
        if not path.startswith("/"):
            raise ConfigurationError(f"the HTTP path must start with '/', got {path!r} (--path)")
        server.run("streamable-http", host=host, port=port, streamable_http_path=path)
    else:
        raise ConfigurationError(f"unknown transport {transport!r}: use 'stdio' or 'http' (--transport)")


# -- the executor of the process ---------------------------------------------


class _ExecutorHolder:
    """Makes the executor at first use, closes it at the end."""

    def __init__(self, factory: Callable[[], Executor]) -> None:
        self._factory = factory
        self._executor: Executor | None = None
        self._lock = anyio.Lock()

    @property
    def current(self) -> Executor | None:
        return self._executor

    async def get(self) -> Executor:
        async with self._lock:
            if self._executor is None:
                try:
                    executor = await anyio.to_thread.run_sync(self._factory)
                except ExecboxError as exc:
                    raise _infrastructure("could not make the executor", exc) from exc
                if not isinstance(executor, Executor):
                    raise MCPError(
                        INTERNAL_ERROR,
                        f"the executor factory returned {type(executor).__name__}, "
                        "not an execbox Executor: fix the server's executor_factory",
                    )
                self._executor = executor
            return self._executor

    async def close(self) -> None:
        with anyio.CancelScope(shield=True):
            async with self._lock:
                executor, self._executor = self._executor, None
                if executor is not None:
                    await anyio.to_thread.run_sync(executor.close)


def _infrastructure(what: str, exc: BaseException, backend: str = "") -> MCPError:
    where = f" ({backend} backend)" if backend else ""
    return MCPError(INTERNAL_ERROR, f"execbox{where} {what}: {exc}")


# -- the tools ------------------------------------------------------------------


def _add_tools(server: MCPServer, holder: _ExecutorHolder) -> None:
    async def run_code(
        code: Annotated[str, Field(description="The code to run, as it would be saved in a file.")],
        language: Annotated[
            str,
            Field(description="Its language: python (the default), sh, bash, or another the backend runs."),
        ] = "python",
        ctx: Context | None = None,
    ) -> CallToolResult:
        """Run code in the workspace and return what it printed.

        The text starts 'exitcode: N (execution succeeded|failed)', then the
        output (stdout and stderr as printed, with the traceback if the code
        failed) and the files the run created or changed. Images the code
        displayed or wrote (PNG, JPEG, GIF, WebP) come back as image content.
        A failing run is a normal result (not a tool error): read the exit
        code. Files persist between calls; variables do only if the backend
        is stateful (jupyter) and until reset_session. While it runs, what it
        prints comes as progress notifications to a client that asks for them.
        """
        executor = await holder.get()
        try:
            if ctx is None:
                result = await executor.arun(CodeBlock(language, code))
            else:
                result = await run_reporting(executor, CodeBlock(language, code), ctx.report_progress)
        except (ExecboxError, OSError) as exc:
            raise _infrastructure("could not run the code", exc, executor.name) from exc
        images, notes = await anyio.to_thread.run_sync(
            _images, executor.workspace, result, executor.limits.max_output_bytes
        )
        text = result.to_text()
        if result.timed_out:
            notes.insert(
                0,
                f"This server allows {executor.limits.timeout_s:g} s per run "
                "(execbox mcp --timeout S; create_server(timeout_s=...)).",
            )
        if notes:
            text = text.rstrip("\n") + "\n" + "\n".join(notes)
        return CallToolResult(content=[TextContent(type="text", text=text), *images])

    async def list_files(
        path: Annotated[
            str, Field(description="A folder relative to the workspace; '.' is all of it.")
        ] = ".",
    ) -> str:
        """List the files and folders under a workspace folder, recursively,
        with their sizes."""
        workspace = (await holder.get()).workspace
        return await _file_call(_list, workspace, path)

    async def read_file(
        path: Annotated[str, Field(description="A file relative to the workspace.")],
    ) -> list[TextContent | ImageContent]:
        """Read a file of the workspace. Text (UTF-8, up to 1 MiB) comes back
        as text; a PNG, JPEG, GIF or WebP image as image content; another
        binary file is not returned: its size and kind are, so inspect it
        with run_code."""
        workspace = (await holder.get()).workspace
        return await _file_call(_read, workspace, path)

    async def write_file(
        path: Annotated[
            str, Field(description="Where to write, relative to the workspace; folders are made.")
        ],
        content: Annotated[str, Field(description="The text to write (UTF-8); replaces the file.")],
    ) -> str:
        """Write a text file into the workspace (replacing it if it exists)."""
        workspace = (await holder.get()).workspace
        return await _file_call(_write, workspace, path, content)

    async def reset_session() -> str:
        """Restart the execution session: stop whatever code runs now and,
        on a stateful backend (jupyter), restart the kernel so variables and
        imports are lost. Files in the workspace stay."""
        executor = holder.current
        if executor is None:
            return "Nothing to reset: no code has run yet."
        try:
            await anyio.to_thread.run_sync(executor.restart)
        except (ExecboxError, OSError) as exc:
            raise _infrastructure("could not restart", exc, executor.name) from exc
        if executor.capabilities.stateful:
            return (
                f"The {executor.name} session was restarted: variables, imports and loaded data are gone. "
                "Files in the workspace stay."
            )
        return (
            f"Stopped whatever was running. The {executor.name} backend keeps no state between runs "
            "(each run_code starts fresh), so nothing else was lost. Files in the workspace stay."
        )

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(run_code, annotations=ToolAnnotations(destructive_hint=True, open_world_hint=True))
    server.add_tool(list_files, annotations=read_only, structured_output=False)
    server.add_tool(read_file, annotations=read_only, structured_output=False)
    server.add_tool(
        write_file,
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )
    server.add_tool(
        reset_session,
        annotations=ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False),
        structured_output=False,
    )


async def _file_call(work: Callable[..., Any], workspace: Workspace, *args: Any) -> Any:
    """Run a file operation in a thread; a path the model can fix is a tool
    error, anything else an infrastructure error."""
    try:
        return await anyio.to_thread.run_sync(work, workspace, *args)
    except WorkspaceError as exc:  # PathEscapeError included
        raise ToolError(str(exc)) from exc
    except (ExecboxError, OSError) as exc:
        raise _infrastructure("could not use the workspace", exc) from exc


def _list(workspace: Workspace, path: str) -> str:
    return list_text(workspace, path)


def _read(workspace: Workspace, path: str) -> list[TextContent | ImageContent]:
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


def _write(workspace: Workspace, path: str, content: str) -> str:
    return write_text(workspace, path, content)


def _images(
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
    images: list[ImageContent] = []
    sent: list[str] = []
    notes: list[str] = []
    for position, (label, path) in enumerate(candidates):
        if len(images) >= MAX_IMAGES:
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
        images.append(ImageContent(type="image", data=base64.b64encode(data).decode("ascii"), mime_type=mime))
        sent.append(label)
    if sent:
        notes.insert(0, "Images returned below: " + ", ".join(sent))
    return images, notes


def _load_image(workspace: Workspace, path: str, most: int) -> bytes | None:
    """At most ``most`` bytes of a file the run wrote (still growing,
    maybe, by what it left running), never through a link; None when it holds more."""
    data = read_at_most(workspace, path, most)
    return None if len(data) > most else data
