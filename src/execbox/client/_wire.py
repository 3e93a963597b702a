"""The client's side of the wire protocol (the server's is
``execbox.server._wire``): request bodies made from Python values, and the
server's errors and times read back. No I/O here."""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any
from urllib.parse import quote

from .._errors import ConfigurationError, ExecutionGoneError, ServiceBusyError, ServiceError, SessionGoneError
from .._gpus import parse_gpus
from .._models import CodeBlock, Limits

__all__ = [
    "MAX_MESSAGE_CHARS",
    "MAX_RETRY_AFTER_S",
    "STATUS_OF_CODE",
    "BlockLike",
    "batch_item",
    "code_body",
    "decode_file",
    "encode_file",
    "files_body",
    "limits_body",
    "parse_time",
    "quote_path",
    "run_body",
    "service_error",
    "with_gpus",
]

BlockLike = CodeBlock | Mapping[str, Any]

# The HTTP status of each error code the server documents (server/_errors.py):
# a batch line or a stream's end carries the code alone.
STATUS_OF_CODE = {
    "bad_request": 400,
    "invalid_limits": 400,
    "path_escape": 400,
    "workspace_error": 400,
    "unauthorized": 401,
    "not_found": 404,
    "method_not_allowed": 405,
    "execution_running": 409,
    "session_expired": 410,
    "execution_gone": 410,
    "too_large": 413,
    "busy": 429,
    "internal": 500,
    "backend_unavailable": 503,
}

# What of a server's error message is kept (it is the server's text: a
# hostile one would fill a log, or the screen, with it).
MAX_MESSAGE_CHARS = 2000
# The longest wait a Retry-After may ask for (a hostile "inf" or 1e308
# would have a caller that honours it sleep forever).
MAX_RETRY_AFTER_S = 300.0

RUN_OPTIONS = ("code", "language", "blocks", "files", "fetch_files", "limits", "backend")


def code_body(code: str | None, language: str, blocks: Sequence[BlockLike] | None) -> dict[str, Any]:
    """``{code, language}`` or ``{blocks: [{code, language, filename?}]}``."""
    if (code is None) == (blocks is None):
        raise ConfigurationError(
            "give either code (a string) or blocks (CodeBlock objects or "
            "{code, language?, filename?} dicts), not both nor neither"
        )
    if code is not None:
        if not isinstance(code, str):
            raise ConfigurationError(f"code must be a str, not {type(code).__name__}")
        return {"code": code, "language": language}
    if isinstance(blocks, (str, bytes)) or not blocks:
        raise ConfigurationError(
            "blocks must be a non-empty list of CodeBlock objects or {code, language?} dicts"
        )
    made = []
    for index, block in enumerate(blocks):
        if isinstance(block, CodeBlock):
            item = {"code": block.code, "language": block.language}
            if block.filename is not None:
                item["filename"] = block.filename
            if block.stdin is not None:
                item["stdin"] = block.stdin
        elif isinstance(block, Mapping) and isinstance(block.get("code"), str):
            item = {"language": language, **block}
        else:
            raise ConfigurationError(
                f"blocks[{index}] must be a CodeBlock or a dict with a 'code' string, not {block!r:.80}"
            )
        made.append(item)
    return {"blocks": made}


def run_body(
    code: str | None = None,
    language: str = "python",
    *,
    blocks: Sequence[BlockLike] | None = None,
    files: Mapping[str, str | bytes] | None = None,
    fetch_files: Sequence[str] | None = None,
    limits: Limits | Mapping[str, Any] | None = None,
    backend: str | None = None,
    gpus: Any = None,
) -> dict[str, Any]:
    """The body of ``POST /v1/run`` (and of an item of a batch)."""
    body = code_body(code, language, blocks)
    if files:
        body["files"] = files_body(files)
    if fetch_files:
        if isinstance(fetch_files, str) or not all(isinstance(p, str) for p in fetch_files):
            raise ConfigurationError("fetch_files must be a list of workspace paths, such as ['out.csv']")
        body["fetch_files"] = list(fetch_files)
    if limits is not None:
        body["limits"] = limits_body(limits)
    if backend is not None:
        body["backend"] = backend
    return with_gpus(body, gpus)


def with_gpus(body: dict[str, Any], gpus: Any) -> dict[str, Any]:
    """``gpus`` in a request body, checked here (the server checks its ``--allow-gpus``)."""
    wanted = parse_gpus(gpus)
    if wanted is not None:
        body["gpus"] = list(wanted)
    return body


def batch_item(item: str | Mapping[str, Any], index: int) -> dict[str, Any]:
    """One request of a batch: code alone, or a dict of ``Client.run``'s arguments."""
    if isinstance(item, str):
        return run_body(item)
    if not isinstance(item, Mapping):
        raise ConfigurationError(
            f"requests[{index}] must be code (a str) or a dict of Client.run's arguments "
            f"({', '.join(RUN_OPTIONS)})"
        )
    unknown = sorted(set(item) - set(RUN_OPTIONS))
    if unknown:
        raise ConfigurationError(
            f"requests[{index}] has unknown keys {', '.join(unknown)}: use {', '.join(RUN_OPTIONS)}"
        )
    return run_body(**item)


def limits_body(limits: Limits | Mapping[str, Any]) -> dict[str, Any]:
    """A ``Limits`` as all of its fields (it is a whole specification); a
    dict as given (its fields over the server's defaults; the server checks it)."""
    if isinstance(limits, Limits):
        return {name: getattr(limits, name) for name in Limits.__dataclass_fields__}
    if isinstance(limits, Mapping):
        return dict(limits)
    raise ConfigurationError(
        f"limits must be a Limits or a dict such as {{'timeout_s': 5}}, not {type(limits).__name__}"
    )


def files_body(files: Mapping[str, str | bytes]) -> dict[str, dict[str, str]]:
    """``{path: str or bytes}`` as the server takes it: str as UTF-8, bytes as base64."""
    if not isinstance(files, Mapping):
        raise ConfigurationError("files must be a dict {path: str or bytes}, such as {'in.csv': 'a,b\\n'}")
    return {path: _encode_file(path, data) for path, data in files.items()}


def _encode_file(path: str, data: str | bytes) -> dict[str, str]:
    if isinstance(data, str):
        return {"content": data, "encoding": "utf-8"}
    if isinstance(data, (bytes, bytearray, memoryview)):
        return {"content": base64.b64encode(bytes(data)).decode("ascii"), "encoding": "base64"}
    raise ConfigurationError(f"files[{path!r}] must be str or bytes, not {type(data).__name__}")


def encode_file(data: bytes) -> dict[str, str]:
    """A file as the server sends one: UTF-8 text when it is, else base64."""
    try:
        return {"content": data.decode("utf-8"), "encoding": "utf-8"}
    except UnicodeDecodeError:
        return {"content": base64.b64encode(data).decode("ascii"), "encoding": "base64"}


def decode_file(spec: Mapping[str, Any]) -> bytes:
    """A file the server sent as ``{content, encoding}``."""
    if spec.get("encoding") == "base64":
        return base64.b64decode(spec["content"])
    return str(spec["content"]).encode("utf-8", "surrogateescape")


def service_error(error: Any, *, status: int | None = None, retry_after: float | None = None) -> ServiceError:
    """The exception for the server's ``{code, message, retryable}`` (the
    value of an answer's ``error``, of a batch line's, of a stream's end)."""
    if not isinstance(error, Mapping):
        error = {
            "code": f"http_{status}" if status else "bad_answer",
            "message": f"the server answered {error!r:.200}",
        }
    code = str(error.get("code", ""))[:100]
    message = str(error.get("message", ""))[:MAX_MESSAGE_CHARS] or f"the server answered {code or 'an error'}"
    if retry_after is not None:  # the server's: a number of seconds, bounded
        retry_after = min(max(retry_after, 0.0), MAX_RETRY_AFTER_S) if retry_after == retry_after else None
    retryable = bool(error.get("retryable", False))
    if status is None:
        status = STATUS_OF_CODE.get(code)
    if code == "execution_gone":  # the session is still open: only this execution was dropped
        return ExecutionGoneError(
            message, reason=_short(error.get("reason")), status=status, code=code, retryable=retryable
        )
    if status == 410 or code == "session_expired":
        return SessionGoneError(
            message, reason=_short(error.get("reason")), status=status, code=code, retryable=retryable
        )
    if status == 429 or code == "busy":
        return ServiceBusyError(message, retry_after=retry_after, status=status, code=code or "busy")
    return ServiceError(message, status=status, code=code, retryable=retryable, retry_after=retry_after)


def _short(value: Any) -> str | None:
    return None if value is None else str(value)[:100]


def quote_path(path: str) -> str:
    """A workspace path as the end of a URL: each segment quoted, and a
    segment of dots quoted too, so that no URL normalisation turns
    ``files/../x`` into another route (the server refuses the path instead)."""
    if not isinstance(path, str) or not path:
        raise ConfigurationError(
            f"a workspace path must be a non-empty str, such as 'data/in.csv', not {path!r}"
        )
    return "/".join(
        "%2E" * len(part) if part and set(part) == {"."} else quote(part, safe="") for part in path.split("/")
    )


def parse_time(value: Any) -> datetime | None:
    """The server's ISO 8601 time (``...Z``) as an aware datetime; None for
    anything else (the server's text: not a reason to fail)."""
    if not isinstance(value, str) or len(value) > 64:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
