"""``POST /run_code``: SandboxFusion's API (ByteDance's code sandbox), so
that a client of it (its ``sandbox_fusion`` package, veRL's reward code)
works by pointing its URL at ``execbox serve``.

The request ``{code, language, stdin?, compile_timeout?, run_timeout?,
memory_limit_MB?, files?: {path: base64}, fetch_files?: [path]}`` runs as
one block of ``/v1/run`` on the server's default backend, within its
limits (400 above them). The answer ``{status, message, compile_result,
run_result, executor_pod_name, files}`` follows SandboxFusion's rules: a
command's status is ``Finished`` (with its return code), ``TimeLimitExceeded``
or ``Error``; the whole is ``SandboxError`` on an ``Error`` (here: a
language this server does not run), else ``Failed`` on a time limit or a
nonzero return code, else ``Success``. execbox does not time a successful
compile apart from the run: a compiled language that compiled answers
``compile_result`` ``{status: Finished, return_code: 0, execution_time:
null}``. Fetched files that are missing (or not readable) are left out, as
SandboxFusion leaves them out."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._errors import ConfigurationError
from .._languages import find_language
from .._models import CodeBlock
from ._config import ServerConfig
from ._errors import ApiError
from ._routes_run import _run_one
from ._state import state_of
from ._wire import RunRequest, field_of, file_path, read_json

__all__ = ["RUN_CODE_ROUTES", "RUN_CODE_SCHEMAS", "SANDBOX_FUSION_LANGUAGES"]

# SandboxFusion's language names that execbox runs: the name execbox knows it by.
SANDBOX_FUSION_LANGUAGES = {
    "python": "python",
    "cpp": "cpp",
    "go": "go",
    "java": "java",
    "nodejs": "javascript",
    "typescript": "typescript",
    "rust": "rust",
    "bash": "bash",
    "php": "php",
    "lua": "lua",
    "R": "r",
    "perl": "perl",
    "ruby": "ruby",
}
DEFAULT_TIMEOUT_S = 10.0  # SandboxFusion's default compile_timeout and run_timeout


async def run_code(request: Request) -> Response:
    state = state_of(request)
    body = await read_json(request, state.config.max_upload_bytes)
    name = field_of(body, "language", str)
    if name is None:
        raise ApiError(
            400, "bad_request", f"'language' is required: one of {', '.join(SANDBOX_FUSION_LANGUAGES)}"
        )
    language = SANDBOX_FUSION_LANGUAGES.get(name)
    todo = _request(body, state.config, language or name)
    if language is None:  # SandboxFusion's runner is not found: its SandboxError
        why = f"language {name!r} is not supported here: use one of {', '.join(SANDBOX_FUSION_LANGUAGES)}"
        return JSONResponse(_answer("SandboxError", why))
    await state.load.enter()
    try:
        result = await _run_one(state, todo)
    finally:
        state.load.release()
    return JSONResponse(_answer_of(result, language))


def _request(body: dict[str, Any], config: ServerConfig, language: str) -> RunRequest:
    """The request as one block in ``language`` on the default backend,
    checked (400 with what is wrong, in SandboxFusion's field names)."""
    code = field_of(body, "code", str)
    if code is None:
        raise ApiError(400, "bad_request", "'code' (a string: the program) is required")
    stdin = field_of(body, "stdin", str)
    asked: dict[str, Any] = {}
    for name, limit in (("run_timeout", "timeout_s"), ("compile_timeout", "compile_timeout_s")):
        seconds = field_of(body, name, (int, float), min(DEFAULT_TIMEOUT_S, config.max_timeout_s))
        if not seconds > 0:
            raise ApiError(400, "invalid_limits", f"{name!r} must be a positive number of seconds")
        if seconds > config.max_timeout_s:
            raise ApiError(
                400,
                "invalid_limits",
                f"{name!r} {seconds:g} is over this server's maximum {config.max_timeout_s:g} "
                "(execbox serve --max-timeout)",
            )
        asked[limit] = seconds
    memory = field_of(body, "memory_limit_MB", int, -1)
    if memory > 0:  # -1 (SandboxFusion's default) or 0: the server's default
        if memory > config.max_memory_mb:
            raise ApiError(
                400,
                "invalid_limits",
                f"'memory_limit_MB' {memory} is over this server's maximum {config.max_memory_mb}",
            )
        asked["memory_mb"] = memory
    try:
        limits = config.limits(asked)
    except ConfigurationError as exc:
        raise ApiError(400, "invalid_limits", str(exc)) from None
    fetch = field_of(body, "fetch_files", list) or []
    if not all(isinstance(path, str) for path in fetch):
        raise ApiError(400, "bad_request", "'fetch_files' must be a list of workspace paths")
    block = CodeBlock(language, code, stdin=stdin)
    return RunRequest(config.backend, [block], limits, _files(body), fetch)


def _files(body: dict[str, Any]) -> dict[str, bytes]:
    """``files``: ``{path: base64}``; a null content is skipped, as SandboxFusion skips it."""
    files = field_of(body, "files", dict) or {}
    decoded = {}
    for path, content in files.items():
        if content is None:
            continue
        file_path(path, f"files[{path!r}]")
        if not path or not isinstance(content, str):
            raise ApiError(400, "bad_request", f"files[{path!r}] must be a path and its base64 content")
        try:
            decoded[path] = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "bad_request", f"files[{path!r}] is not valid base64") from None
    return decoded


def _answer(
    status: str,
    message: str = "",
    compile_result: dict[str, Any] | None = None,
    run_result: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "status": status,
        "message": message,
        "compile_result": compile_result,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": files or {},
    }


def _command(status: str, block: dict[str, Any], return_code: int | None) -> dict[str, Any]:
    return {
        "status": status,
        "execution_time": block.get("duration_s"),
        "return_code": return_code,
        "stdout": block.get("stdout", ""),
        "stderr": block.get("stderr", ""),
    }


def _answer_of(result: dict[str, Any], language: str) -> dict[str, Any]:
    """``/v1/run``'s answer (one block) as SandboxFusion's."""
    files = {
        path: _base64(found)
        for path, found in (result.get("file_contents") or {}).items()
        if "content" in found
    }
    blocks = result.get("blocks") or []
    if not blocks:
        error = result.get("error") or {}
        return _answer("SandboxError", error.get("value") or "the block did not run", files=files)
    block = blocks[0]
    status, error = block["status"], block.get("error") or {}
    lang = find_language(language)
    compiled = lang is not None and lang.build is not None
    compile_result = run_result = None
    if status == "compile_error" and error.get("name") == "CompileTimeout":
        compile_result = _command("TimeLimitExceeded", block, None)
    elif status == "compile_error" and error.get("name") in ("CompileError", "CompileMemoryLimit"):
        compile_result = _command("Finished", block, block["exit_code"] or 1)
    elif status in ("ok", "failed", "timeout"):
        if compiled:
            compile_result = {
                "status": "Finished",
                "execution_time": None,  # not timed apart from the run
                "return_code": 0,
                "stdout": "",
                "stderr": "",
            }
        if status == "timeout":
            run_result = _command("TimeLimitExceeded", block, None)
        else:
            code = block["exit_code"] if status == "ok" else block["exit_code"] or 1
            run_result = _command("Finished", block, code)
    else:  # unsupported (no toolchain here), refused, cancelled: SandboxFusion's Error
        why = error.get("value") or f"the block was {status}"
        return _answer("SandboxError", why, files=files)
    commands = [c for c in (compile_result, run_result) if c is not None]
    failed = any(c["status"] == "TimeLimitExceeded" or (c["return_code"] or 0) != 0 for c in commands)
    return _answer("Failed" if failed else "Success", "", compile_result, run_result, files)


def _base64(found: dict[str, str]) -> str:
    if found.get("encoding") == "base64":
        return found["content"]
    return base64.b64encode(found["content"].encode("utf-8")).decode("ascii")


_COMMAND = {
    "type": ["object", "null"],
    "required": ["status"],
    "properties": {
        "status": {"enum": ["Finished", "Error", "TimeLimitExceeded"]},
        "execution_time": {"type": ["number", "null"]},
        "return_code": {"type": ["integer", "null"]},
        "stdout": {"type": ["string", "null"]},
        "stderr": {"type": ["string", "null"]},
    },
}
RUN_CODE_SCHEMAS: dict[str, Any] = {
    "RunCodeRequest": {
        "type": "object",
        "description": "SandboxFusion's /run_code request",
        "required": ["code", "language"],
        "properties": {
            "code": {"type": "string"},
            "language": {"type": "string", "examples": list(SANDBOX_FUSION_LANGUAGES)},
            "stdin": {"type": ["string", "null"]},
            "compile_timeout": {"type": "number", "default": DEFAULT_TIMEOUT_S},
            "run_timeout": {"type": "number", "default": DEFAULT_TIMEOUT_S},
            "memory_limit_MB": {"type": "integer", "default": -1},
            "files": {
                "type": "object",
                "description": "workspace path -> base64 content (null: skipped)",
                "additionalProperties": {"type": ["string", "null"]},
            },
            "fetch_files": {"type": "array", "items": {"type": "string"}},
        },
    },
    "RunCodeResponse": {
        "type": "object",
        "description": "SandboxFusion's /run_code answer",
        "required": ["status", "message", "compile_result", "run_result", "executor_pod_name", "files"],
        "properties": {
            "status": {"enum": ["Success", "Failed", "SandboxError"]},
            "message": {"type": "string"},
            "compile_result": _COMMAND,
            "run_result": _COMMAND,
            "executor_pod_name": {"type": ["string", "null"]},
            "files": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    },
}

RUN_CODE_ROUTES = [Route("/run_code", run_code, methods=["POST"])]
