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
from ._bodies import DEFAULT_TIMEOUT_S, SANDBOX_FUSION_LANGUAGES, RunCodeRequest, checked
from ._config import ServerConfig
from ._disconnect import unless_gone
from ._errors import ApiError
from ._pieces import json_answer
from ._routes_run import _run_one
from ._state import state_of
from ._wire import RunJob, file_path, read_json

__all__ = ["RUN_CODE_ROUTES", "SANDBOX_FUSION_LANGUAGES"]


async def run_code(request: Request) -> Response:
    state = state_of(request)
    body = checked(RunCodeRequest, await read_json(request, state.config.max_upload_bytes))
    name = body.language
    language = SANDBOX_FUSION_LANGUAGES.get(name)
    todo = _request(body, state.config, language or name)
    if language is None:  # SandboxFusion's runner is not found: its SandboxError
        why = f"language {name!r} is not supported here: use one of {', '.join(SANDBOX_FUSION_LANGUAGES)}"
        return JSONResponse(_answer("SandboxError", why))
    await state.load.enter()
    try:
        result = await unless_gone(request, _run_one(state, todo))  # a client gone: its run killed
    finally:
        state.load.release()
    return json_answer(_answer_of(result, language))


def _request(body: RunCodeRequest, config: ServerConfig, language: str) -> RunJob:
    """The request as one block in ``language`` on the default backend,
    checked (400 with what is wrong, in SandboxFusion's field names)."""
    asked: dict[str, Any] = {}
    for name, limit, given in (
        ("run_timeout", "timeout_s", body.run_timeout),
        ("compile_timeout", "compile_timeout_s", body.compile_timeout),
    ):
        seconds = min(DEFAULT_TIMEOUT_S, config.max_timeout_s)
        if given is not None and name in body.model_fields_set:
            seconds = given
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
    memory = -1 if body.memory_limit_MB is None else body.memory_limit_MB
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
    block = CodeBlock(language, body.code, stdin=body.stdin)
    return RunJob(config.backend, [block], limits, _files(body.files), body.fetch_files or [])


def _files(files: dict[str, str | None] | None) -> dict[str, bytes]:
    """``files``: ``{path: base64}``; a null content is skipped, as SandboxFusion skips it."""
    decoded = {}
    for path, content in (files or {}).items():
        if content is None:
            continue
        file_path(path, f"files[{path!r}]")
        if not path:
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


RUN_CODE_ROUTES = [Route("/run_code", run_code, methods=["POST"])]
