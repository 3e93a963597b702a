"""The wire protocol: request bodies read and checked, files encoded both
ways, and the SSE framing. Routes use these and never parse by hand."""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import os
import re
import stat
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from .._errors import ConfigurationError
from .._models import CodeBlock, Limits
from .._workspace import Workspace
from ._bodies import ExecutionRequest, FileSpec, RunRequest, checked
from ._bodies import Limits as LimitsBody
from ._config import ServerConfig
from ._errors import ApiError

__all__ = [
    "SSE_KEEPALIVE",
    "RunJob",
    "backend_of",
    "blocks_of",
    "decode_files",
    "encode_file",
    "file_path",
    "gpus_of",
    "limits_of",
    "read_body",
    "read_file",
    "read_json",
    "run_request",
    "sse",
]

SSE_KEEPALIVE = b": keepalive\n\n"


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused with 413 as soon as it passes ``limit`` bytes."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> ApiError:
    return ApiError(
        413,
        "too_large",
        f"the body is over {limit} bytes (at least {size}): this server takes "
        f"at most {limit} (execbox serve --max-upload-mb)",
    )


JSON_TYPE = "application/json"
MAX_JSON_ITEMS = 1_000_000  # values (array items, object members, numbers) in one JSON body
MAX_JSON_DEPTH = 64  # arrays and objects inside one another
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


async def read_json(request: Request, limit: int) -> dict[str, Any]:
    """The body as a JSON object. Refused with 415 when it is sent as
    anything but ``Content-Type: application/json`` (a page of any site can
    send ``text/plain`` or a form without asking); with 413 over ``limit``
    bytes (``--max-upload-mb``) or ``MAX_JSON_ITEMS`` values; with 400:
    text that is not UTF-8, not JSON (``NaN`` and ``Infinity`` neither),
    nested deeper than ``MAX_JSON_DEPTH``, or holding a string with a lone
    surrogate (``"\\ud800"``: no file, path or answer can hold it; each was
    a 500 before). Parsed off the event loop, so that one large body does
    not hold up every other client."""
    kind = request.headers.get("content-type")
    media = (kind or "").split(";")[0].strip().lower()
    if (kind is not None and media != JSON_TYPE) or (
        kind is None and request.headers.get("content-length") not in (None, "0")
    ):
        raise ApiError(
            415,
            "unsupported_media_type",
            f"the body is sent as {kind or 'no Content-Type'}: set the "
            f"header Content-Type: {JSON_TYPE} (this route takes JSON)",
        )
    body = await read_body(request, limit)
    if not body.strip():
        return {}
    return await asyncio.to_thread(parse_json, body)


class _TooMany(Exception):
    pass


def parse_json(body: bytes) -> dict[str, Any]:
    """``read_json``'s checks on a body in hand (run in a thread). The
    parser calls back into Python for every object and number, so that
    other threads (the event loop) get the GIL while it runs, and counts."""
    count = [0]

    def counted(value: Any, size: int = 1) -> Any:
        count[0] += size
        if count[0] > MAX_JSON_ITEMS:
            raise _TooMany
        return value

    try:
        data = json.loads(
            body.decode("utf-8"),
            parse_constant=_not_json,
            object_pairs_hook=lambda pairs: counted(dict(pairs), len(pairs)),
            parse_int=lambda text: counted(int(text)),
            parse_float=lambda text: counted(float(text)),
        )
        _bounded(data, count[0])
    except _TooMany:
        raise ApiError(
            413,
            "too_large",
            f"the body holds over {MAX_JSON_ITEMS} JSON values "
            "(execbox.server._wire.MAX_JSON_ITEMS): send fewer, or large data "
            "as one base64 string or a file (PUT .../files/PATH)",
        ) from None
    except (ValueError, RecursionError) as exc:
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise ApiError(400, "bad_request", f"the body is not JSON: {why}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    if _SURROGATE_ESCAPE.search(body):  # a lone surrogate can only come from a \\uD8xx escape
        where = _lone_surrogate(data)
        if where is not None:
            raise ApiError(
                400,
                "bad_request",
                f"{where} has a lone surrogate (such as \\ud800): JSON strings "
                "here must be Unicode text; send bytes as base64",
            )
    return data


def _bounded(data: Any, counted: int) -> None:
    """Raise ``_TooMany`` past ``MAX_JSON_ITEMS`` values (array items added to
    those ``counted`` already), ``ValueError`` deeper than ``MAX_JSON_DEPTH``."""
    todo: list[tuple[Any, int]] = [(data, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > MAX_JSON_DEPTH:
            raise ValueError(
                f"nested deeper than {MAX_JSON_DEPTH} arrays and objects "
                "(execbox.server._wire.MAX_JSON_DEPTH): flatten it"
            )
        if isinstance(value, list):
            counted += len(value)
            if counted > MAX_JSON_ITEMS:
                raise _TooMany
            todo.extend((item, depth + 1) for item in value if isinstance(item, (list, dict)))
        elif isinstance(value, dict):
            todo.extend((item, depth + 1) for item in value.values() if isinstance(item, (list, dict)))


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON value")


def _lone_surrogate(data: dict[str, Any]) -> str | None:
    """Where (``files["a"].content``) the first string with a lone surrogate is, or None."""
    todo: list[tuple[str, Any]] = [("", data)]
    while todo:
        where, value = todo.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if not _is_text(key):
                    return f"a key of {where or 'the body'}"
                todo.append((_member(where, key), item))
        elif isinstance(value, list):
            todo.extend((f"{where}[{index}]", item) for index, item in enumerate(value))
        elif isinstance(value, str) and not _is_text(value):
            return where
    return None


def _member(where: str, key: str) -> str:
    if key.isidentifier():
        return f"{where}.{key}" if where else key
    return f"{where}[{json.dumps(key)}]"


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def blocks_of(body: ExecutionRequest) -> list[CodeBlock]:
    """``code`` (with ``language``, default python, and ``stdin``) or
    ``blocks``: a list of ``{code, language?, filename?, stdin?}``."""
    language = "python" if body.language is None else body.language
    if (body.code is None) == (body.blocks is None):
        raise ApiError(
            400,
            "bad_request",
            "give either 'code' (a string) or 'blocks' (a list of {code, language?, filename?})",
        )
    if body.code is not None:
        return [CodeBlock(language, body.code, stdin=body.stdin)]
    if not body.blocks:
        raise ApiError(400, "bad_request", "'blocks' is empty: give at least one {code, language?}")
    return [
        CodeBlock(language if b.language is None else b.language, b.code, b.filename, stdin=b.stdin)
        for b in body.blocks
    ]


def decode_files(files: dict[str, FileSpec | str] | None) -> dict[str, bytes]:
    """``files``: ``{path: {content, encoding: "utf-8" | "base64"}}`` (or a bare string: UTF-8)."""
    decoded = {}
    for path, spec in (files or {}).items():
        file_path(path, f"files[{path!r}]")
        if isinstance(spec, str):
            decoded[path] = spec.encode("utf-8", "surrogateescape")
        elif spec.encoding == "utf-8":
            decoded[path] = spec.content.encode("utf-8", "surrogateescape")
        else:
            try:
                decoded[path] = base64.b64decode(spec.content, validate=True)
            except (binascii.Error, ValueError):
                raise ApiError(400, "bad_request", f"files[{path!r}] is not valid base64") from None
    return decoded


def file_path(path: str, what: str) -> str:
    """``path`` unless it names the workspace itself (``.``, ``d/..``): a
    file cannot be written there (a ValueError, so a 500, before)."""
    if path and os.path.normpath(path) == ".":
        raise ApiError(400, "bad_request", f"{what} names the workspace itself, not a file in it")
    return path


def encode_file(data: bytes) -> dict[str, str]:
    """A file as JSON: UTF-8 text when it is, else base64."""
    try:
        return {"content": data.decode("utf-8"), "encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"content": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


@dataclass(frozen=True)
class RunJob:
    """One stateless run (``/v1/run``, an item of ``/v1/batch``), checked."""

    backend: str
    blocks: list[CodeBlock]
    limits: Limits
    files: dict[str, bytes]
    fetch_files: list[str]
    gpus: tuple[str, ...] | None = None


def run_request(data: Any, config: ServerConfig) -> RunJob:
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "a run request must be a JSON object")
    body = checked(RunRequest, data)
    limits = limits_of(body.limits, config)
    blocks = blocks_of(body)
    backend = backend_of(body.backend, config)
    files = decode_files(body.files)
    return RunJob(backend, blocks, limits, files, body.fetch_files or [], gpus_of(body.gpus, config, backend))


def gpus_of(asked: Any, config: ServerConfig, backend: str) -> tuple[str, ...] | None:
    """The request's ``gpus``, within the server's ``--allow-gpus`` (400 ``bad_request``)."""
    try:
        return config.gpus(asked, backend)
    except ConfigurationError as exc:
        raise ApiError(400, "bad_request", str(exc)) from None


def limits_of(asked: LimitsBody | None, config: ServerConfig) -> Limits:
    """The request's ``limits`` over the server's defaults (400 ``invalid_limits``)."""
    try:
        return config.limits(None if asked is None else asked.model_dump(exclude_unset=True))
    except ConfigurationError as exc:
        raise ApiError(400, "invalid_limits", str(exc)) from None


def read_file(workspace: Workspace, path: str, limit: int) -> bytes:
    """A workspace file's bytes; 413 over ``limit``, ``IsADirectoryError`` for a folder."""
    st = workspace.resolve(path).lstat()
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(path)
    if st.st_size > limit:
        raise ApiError(
            413,
            "too_large",
            f"{path!r} is {st.st_size} bytes, over {limit} "
            "(execbox serve --max-upload-mb): run code to read a part of it",
        )
    return workspace.download(path)


def backend_of(asked: str | None, config: ServerConfig) -> str:
    backend = asked or config.backend
    if backend not in config.backends:
        raise ApiError(
            400,
            "bad_request",
            f"backend {backend!r} is not served here: use one of "
            f"{', '.join(config.backends)} (execbox serve --backends)",
        )
    return backend


def sse(event_id: int, event: str, data: Any) -> bytes:
    """One server-sent event (``data`` as one line of JSON)."""
    return f"id: {event_id}\nevent: {event}\ndata: {json.dumps(data)}\n\n".encode()
