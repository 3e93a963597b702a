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

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from .._errors import ConfigurationError, ExecboxError, WorkspaceError, install_hint
from .._gpus import check_gpu_backend, parse_gpus
from .._models import CodeBlock, Limits
from .._version import __version__
from .._workspace import Workspace
from ..backends import DEFAULT_BACKEND, Executor, get_backend
from ._files import MAX_IMAGE_BYTES, MAX_TEXT_BYTES, list_text, write_text
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

    from ._mcp_content import MAX_IMAGES, file_content, run_content
except ImportError as _exc:  # mcp missing or 1.x
    raise _missing_sdk(_exc) from _exc

__all__ = ["MAX_IMAGES", "MAX_IMAGE_BYTES", "MAX_TEXT_BYTES", "create_server", "serve"]

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
    list_files, read_file, write_file = _file_tools(holder)
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    rewrites = ToolAnnotations(destructive_hint=True, idempotent_hint=True, open_world_hint=False)
    server.add_tool(
        _run_code_tool(holder), annotations=ToolAnnotations(destructive_hint=True, open_world_hint=True)
    )
    server.add_tool(list_files, annotations=read_only, structured_output=False)
    server.add_tool(read_file, annotations=read_only, structured_output=False)
    server.add_tool(write_file, annotations=rewrites, structured_output=False)
    server.add_tool(_reset_session_tool(holder), annotations=rewrites, structured_output=False)


def _run_code_tool(holder: _ExecutorHolder) -> Callable[..., Any]:
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
        content = await anyio.to_thread.run_sync(run_content, executor.workspace, result, executor.limits)
        return CallToolResult(content=[*content])

    return run_code


def _file_tools(holder: _ExecutorHolder) -> tuple[Callable[..., Any], ...]:
    """list_files, read_file and write_file on the executor's workspace."""

    async def list_files(
        path: Annotated[
            str, Field(description="A folder relative to the workspace; '.' is all of it.")
        ] = ".",
    ) -> str:
        """List the files and folders under a workspace folder, recursively,
        with their sizes."""
        workspace = (await holder.get()).workspace
        return await _file_call(list_text, workspace, path)

    async def read_file(
        path: Annotated[str, Field(description="A file relative to the workspace.")],
    ) -> list[TextContent | ImageContent]:
        """Read a file of the workspace. Text (UTF-8, up to 1 MiB) comes back
        as text; a PNG, JPEG, GIF or WebP image as image content; another
        binary file is not returned: its size and kind are, so inspect it
        with run_code."""
        workspace = (await holder.get()).workspace
        return await _file_call(file_content, workspace, path)

    async def write_file(
        path: Annotated[
            str, Field(description="Where to write, relative to the workspace; folders are made.")
        ],
        content: Annotated[str, Field(description="The text to write (UTF-8); replaces the file.")],
    ) -> str:
        """Write a text file into the workspace (replacing it if it exists)."""
        workspace = (await holder.get()).workspace
        return await _file_call(write_text, workspace, path, content)

    return list_files, read_file, write_file


def _reset_session_tool(holder: _ExecutorHolder) -> Callable[..., Any]:
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

    return reset_session


async def _file_call(work: Callable[..., Any], workspace: Workspace, *args: Any) -> Any:
    """Run a file operation in a thread; a path the model can fix is a tool
    error, anything else an infrastructure error."""
    try:
        return await anyio.to_thread.run_sync(work, workspace, *args)
    except WorkspaceError as exc:  # PathEscapeError included
        raise ToolError(str(exc)) from exc
    except (ExecboxError, OSError) as exc:
        raise _infrastructure("could not use the workspace", exc) from exc
