"""A session's files, through its executor's ``Workspace`` (so a path that
leads outside it is refused: ``400 path_escape``): list, and raw bodies
to read, write and remove one."""

from __future__ import annotations

import asyncio
import mimetypes
import stat
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import WorkspaceError
from .._workspace import Workspace
from ._errors import ApiError, from_execbox
from ._routes_sessions import session_of
from ._state import state_of
from ._wire import read_body

__all__ = ["ROUTES"]


def _mime(path: str) -> str:
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


async def _in_thread(call: Any, *args: Any) -> Any:
    try:
        return await asyncio.to_thread(call, *args)
    except WorkspaceError as exc:
        if "no folder" in str(exc) or "no file" in str(exc):
            raise ApiError(404, "not_found", str(exc)) from None
        raise from_execbox(exc) from None
    except FileNotFoundError:
        raise ApiError(404, "not_found", f"no such file: {args[-1]!r}") from None
    except IsADirectoryError:
        raise ApiError(400, "workspace_error", f"{args[-1]!r} is a folder: list it with GET .../files?path=")
    except OSError as exc:
        raise from_execbox(exc) from None


async def listing(request: Request) -> Response:
    session = session_of(request)
    session.touch()
    path = request.query_params.get("path", ".")
    entries = await _in_thread(session.executor.workspace.list, path)
    return JSONResponse({"path": path, "files": [
        {"name": e.path, "type": "dir" if e.is_dir else "file", "size": e.size, "mtime": e.mtime,
         "mime": None if e.is_dir else _mime(e.path)} for e in entries]})


def _read(workspace: Workspace, path: str, limit: int) -> bytes:
    target = workspace.resolve(path)
    st = target.lstat()
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    if st.st_size > limit:
        raise ApiError(413, "too_large", f"{path!r} is {st.st_size} bytes, over {limit} "
                                         "(execbox serve --max-upload-mb): run code to read a part of it")
    return workspace.download(path)


async def get_file(request: Request) -> Response:
    session = session_of(request)
    session.touch()
    path = request.path_params["path"]
    data = await _in_thread(_read, session.executor.workspace, path, state_of(request).config.max_upload_bytes)
    return Response(data, media_type=_mime(path))


async def put_file(request: Request) -> Response:
    session = session_of(request)
    path = request.path_params["path"]
    data = await read_body(request, state_of(request).config.max_upload_bytes)
    workspace = session.executor.workspace
    existed = await _in_thread(lambda given: workspace.resolve(given).exists(), path)
    await _in_thread(workspace.write_bytes, path, data)
    session.touch()
    return JSONResponse({"name": path, "size": len(data), "mime": _mime(path)}, status_code=200 if existed else 201)


async def delete_file(request: Request) -> Response:
    session = session_of(request)
    path = request.path_params["path"]
    await _in_thread(session.executor.workspace.remove, path)
    session.touch()
    return JSONResponse({"name": path, "deleted": True})


ROUTES = [
    Route("/v1/sessions/{sid}/files", listing, methods=["GET"]),
    Route("/v1/sessions/{sid}/files/{path:path}", get_file, methods=["GET"]),
    Route("/v1/sessions/{sid}/files/{path:path}", put_file, methods=["PUT"]),
    Route("/v1/sessions/{sid}/files/{path:path}", delete_file, methods=["DELETE"]),
]
