"""A session's files, through its executor's ``Workspace`` (so a path that
leads outside it is refused: ``400 path_escape``): list, and raw bodies
to read, write and remove one. A file where a folder is needed (``a/b``
with ``a`` a file, or listing a file) is ``400 workspace_error``; nothing
at the path, ``404``."""

from __future__ import annotations

import asyncio
import mimetypes
import os
import re
import stat
from typing import Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._errors import PathEscapeError, WorkspaceError
from .._workspace import Workspace
from ._errors import ApiError, from_execbox
from ._openapi_ops import ERROR, PATH, SESSION_ERRORS, SID, ApiRoute, Op, json_answer_of
from ._openapi_schemas import ref
from ._routes_sessions import session_of
from ._state import state_of
from ._wire import file_path, read_body, read_file

__all__ = ["ROUTES"]


def _mime(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


async def _in_thread(call: Any, workspace: Workspace, path: str, *args: Any) -> Any:
    """``call(path, *args)`` off the loop; a failure as an answer: 400 when a
    file stands where ``path`` needs a folder, 404 when nothing is at
    ``path`` (looked at, not read from the message)."""
    try:
        return await asyncio.to_thread(call, path, *args)
    except (WorkspaceError, OSError) as exc:
        in_the_way = await asyncio.to_thread(_file_in_the_way, workspace, path)
        if in_the_way is not None:
            raise ApiError(400, "workspace_error", in_the_way) from None
        if isinstance(exc, PathEscapeError):
            raise from_execbox(exc) from None
        if not await asyncio.to_thread(_present, workspace, path):
            raise ApiError(404, "not_found", f"nothing at {path!r} in the session's workspace") from None
        if isinstance(exc, IsADirectoryError):
            raise ApiError(
                400, "workspace_error", f"{path!r} is a folder: list it with GET .../files?path="
            ) from None
        raise from_execbox(exc) from None


def _present(workspace: Workspace, path: str) -> bool:
    """Whether something (a link too) is at ``path``, by its name alone."""
    return os.path.lexists(os.path.join(workspace.path, os.path.normpath(path)))


def _file_in_the_way(workspace: Workspace, path: str) -> str | None:
    """What is wrong when a regular file stands where ``path`` needs a
    folder (``a/b`` with ``a`` a file), else None. Looked at
    with ``lstat`` inside the workspace only: a link on the way, or a path
    that leads out, stays a path escape (and says nothing of what is there)."""
    try:
        workspace.resolve(path)
    except PathEscapeError:
        return None
    parts = os.path.normpath(path).split(os.sep)
    for depth in range(1, len(parts) + 1):
        name = os.path.join(*parts[:depth])
        try:
            st = os.lstat(os.path.join(workspace.path, name))
        except OSError:
            return None
        if stat.S_ISREG(st.st_mode):
            if depth < len(parts):
                return f"{name!r} is a file, not a folder: {path!r} cannot be inside it"
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
    return None


async def listing(request: Request) -> Response:
    session = session_of(request)
    session.touch()
    path = request.query_params.get("path", ".")
    workspace = session.executor.workspace
    entries = await _in_thread(lambda given: _list(workspace, given), workspace, path)
    return JSONResponse(
        {
            "path": path,
            "files": [
                {
                    "name": e.path,
                    "type": "dir" if e.is_dir else "file",
                    "size": e.size,
                    "mtime": e.mtime,
                    "mime": None if e.is_dir else _mime(e.path),
                }
                for e in entries
            ],
        }
    )


def _list(workspace: Workspace, path: str) -> list[Any]:
    if path not in ("", ".") and stat.S_ISREG(workspace.resolve(path).lstat().st_mode):
        raise ApiError(400, "workspace_error", f"{path!r} is a file: read it with GET .../files/{path}")
    return workspace.list(path)


async def get_file(request: Request) -> Response:
    session = session_of(request)
    session.touch()
    path = request.path_params["path"]
    workspace = session.executor.workspace
    data = await _in_thread(
        lambda given, limit: read_file(workspace, given, limit),
        workspace,
        path,
        state_of(request).config.max_upload_bytes,
    )
    return Response(data, media_type=_mime(path), headers=download_headers(path))


def download_headers(path: str) -> dict[str, str]:
    """A workspace file is the blocks' to write, so never a page of the
    API's origin: a download (``attachment``), its type not sniffed, and
    sandboxed with nothing allowed should a browser show it anyway (an
    ``<img>`` of it, or a ``fetch``, still reads it)."""
    name = os.path.basename(os.path.normpath(path)) or "file"
    plain = re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "file"
    encoded = quote(name.encode("utf-8", "surrogatepass"), safe="")
    return {
        "Content-Disposition": f"attachment; filename=\"{plain}\"; filename*=UTF-8''{encoded}",
        "X-Content-Type-Options": "nosniff",
        "Content-Security-Policy": "sandbox; default-src 'none'",
    }


async def put_file(request: Request) -> Response:
    session = session_of(request)
    path = file_path(request.path_params["path"], f"PUT .../files/{request.path_params['path']}")
    data = await read_body(request, state_of(request).config.max_upload_bytes)
    workspace = session.executor.workspace
    existed = await _in_thread(lambda given: workspace.resolve(given).exists(), workspace, path)
    # the blocks' to rewrite, as their own (the jail's id, a container's user)
    await _in_thread(session.executor.files.write, workspace, path, data)
    session.touch()
    return JSONResponse(
        {"name": path, "size": len(data), "mime": _mime(path)}, status_code=200 if existed else 201
    )


async def delete_file(request: Request) -> Response:
    session = session_of(request)
    path = request.path_params["path"]
    workspace = session.executor.workspace
    await _in_thread(session.executor.files.delete, workspace, path)
    session.touch()
    return JSONResponse({"name": path, "deleted": True})


async def one_file(request: Request) -> Response:
    """One route for the three methods, so that a 405 names them all in ``Allow``."""
    return await {"PUT": put_file, "DELETE": delete_file}.get(request.method, get_file)(request)


BINARY = {"type": "string", "format": "binary"}
ROUTES = [
    ApiRoute(
        "/v1/sessions/{sid}/files",
        listing,
        get=Op(
            "List files (recursively)",
            {"200": json_answer_of(ref("FileList")), "400": ERROR, **SESSION_ERRORS},
            params=[SID, {"name": "path", "in": "query", "schema": {"type": "string", "default": "."}}],
        ),
    ),
    ApiRoute(
        "/v1/sessions/{sid}/files/{path:path}",
        one_file,
        get=Op(
            "Read a file (raw body)",
            {
                "200": {"description": "the file", "content": {"*/*": {"schema": BINARY}}},
                "400": ERROR,
                "413": ERROR,
                **SESSION_ERRORS,
            },
            params=[SID, PATH],
        ),
        put=Op(
            "Write a file (raw body)",
            {
                "200": json_answer_of({"type": "object"}, "Replaced"),
                "201": json_answer_of({"type": "object"}, "Created"),
                "400": ERROR,
                "413": ERROR,
                **SESSION_ERRORS,
            },
            params=[SID, PATH],
            extra={"requestBody": {"content": {"application/octet-stream": {"schema": BINARY}}}},
        ),
        delete=Op(
            "Remove a file or an empty folder",
            {"200": json_answer_of({"type": "object"}), "400": ERROR, **SESSION_ERRORS},
            params=[SID, PATH],
        ),
    ),
]
