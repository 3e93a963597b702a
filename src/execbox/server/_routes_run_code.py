"""``POST /run_code``: SandboxFusion's API (ByteDance's code sandbox), so
that a client of it (its ``sandbox_fusion`` package, veRL's reward code)
works by pointing its URL at ``execbox serve``; on a server that takes a
token, the URL carries it (``/t/<token>/run_code``: ``_url_token``).

The request ``{code, language, stdin?, compile_timeout?, run_timeout?,
memory_limit_MB?, files?: {path: base64}, fetch_files?: [path]}`` runs as
one block of ``/v1/run`` on the server's default backend. Its limits are
taken as SandboxFusion's own model takes them (a number in a string, a
whole float for the megabytes) and, as SandboxFusion refuses none, held to
this server's maxima rather than refused: a 400 would be scored as the
sandbox's failure (veRL's -1) on every case. What was held is said in the
``X-Execbox-Clamped`` header (``run_timeout=600 (asked 900), ...``):
SandboxFusion's answer has no field for it, and its ``message`` is ''
unless something failed.

The answer ``{status, message, compile_result, run_result,
executor_pod_name, files}`` follows SandboxFusion's rules: a command's
status is ``Finished`` (with its return code), ``TimeLimitExceeded`` or
``Error``; the whole is ``SandboxError`` when the block could not run here
(a language this server does not run), else ``Failed`` on a time limit, a
nonzero return code or an ``Error``, else ``Success``. A compiled
language's ``compile_result`` has the compile's own time.

Output past the server's cap (``Limits.max_output_bytes``) is ``Failed``
with ``run_result.status`` ``Error`` (its own return code kept, the cut
output with execbox's marker, the reason in ``message``). SandboxFusion
has no status of its own for it (it keeps the first MiB and says nothing);
``Error`` is the one its shape offers for "the command did not run to a
result the caller may read", and the one veRL scores as a runtime error
(-2) inside ``Failed``, where ``Success`` would have its cut stdout
compared as an answer and ``Finished`` with a made-up return code would
lie. Fetched files that are missing (or not readable) are left out, as
SandboxFusion leaves them out."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .._errors import ConfigurationError
from .._languages import find_language
from .._models import CodeBlock, Limits
from ._bodies import DEFAULT_TIMEOUT_S, RunCodeRequest, checked
from ._config import ServerConfig
from ._disconnect import unless_gone
from ._errors import ApiError
from ._openapi_ops import BUSY, ERROR, ApiRoute, Op, json_answer_of
from ._openapi_schemas import ref
from ._pieces import json_answer
from ._routes_run import _run_one
from ._sandbox_fusion_languages import SANDBOX_FUSION_LANGUAGES, refusal
from ._state import state_of
from ._wire import RunJob, file_path, read_json

__all__ = ["CLAMPED_HEADER", "RUN_CODE_ROUTES", "SANDBOX_FUSION_LANGUAGES"]

CLAMPED_HEADER = "X-Execbox-Clamped"  # the limits held to the server's maxima


async def run_code(request: Request) -> Response:
    state = state_of(request)
    body = checked(RunCodeRequest, await read_json(request, state.config.max_upload_bytes))
    name = body.language
    language = SANDBOX_FUSION_LANGUAGES.get(name)
    todo, clamped = _request(body, state.config, language or name)
    if language is None:  # SandboxFusion's runner is not found: its SandboxError
        return JSONResponse(_answer("SandboxError", refusal(name)))
    # a client gone: out of the server's line (never run), or its run killed
    result = await unless_gone(request, state.load.in_slot(lambda: _run_one(state, todo)))
    headers = {CLAMPED_HEADER: ", ".join(clamped)} if clamped else None
    return json_answer(_answer_of(result, language, todo.limits), headers=headers)


def _request(body: RunCodeRequest, config: ServerConfig, language: str) -> tuple[RunJob, list[str]]:
    """The request as one block in ``language`` on the default backend, and
    what of its limits was held to the server's maxima (``name=held (asked
    N)``); a limit that is not a positive number is a 400 naming it."""
    asked: dict[str, Any] = {}
    clamped: list[str] = []
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
            clamped.append(f"{name}={config.max_timeout_s:g} (asked {seconds:g})")
            seconds = config.max_timeout_s
        asked[limit] = seconds
    memory = -1 if body.memory_limit_MB is None else body.memory_limit_MB
    if memory > 0:  # -1 (SandboxFusion's default) or 0: the server's default
        if memory > config.max_memory_mb:
            clamped.append(f"memory_limit_MB={config.max_memory_mb} (asked {memory})")
            memory = config.max_memory_mb
        asked["memory_mb"] = memory
    try:
        limits = config.limits(asked)
    except ConfigurationError as exc:
        raise ApiError(400, "invalid_limits", str(exc)) from None
    block = CodeBlock(language, body.code, stdin=body.stdin)
    return RunJob(config.backend, [block], limits, _files(body.files), body.fetch_files or []), clamped


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


def _answer_of(result: dict[str, Any], language: str, limits: Limits) -> dict[str, Any]:
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
    message = ""
    if status == "compile_error" and error.get("name") == "CompileTimeout":
        compile_result = _command("TimeLimitExceeded", block, None)
    elif status == "compile_error" and error.get("name") in ("CompileError", "CompileMemoryLimit"):
        compile_result = _command("Finished", block, block["exit_code"] or 1)
    elif status in ("ok", "failed", "timeout"):
        if compiled:
            compile_result = {
                "status": "Finished",
                "execution_time": block.get("compile_duration_s"),  # the build's own time
                "return_code": 0,
                "stdout": "",
                "stderr": "",
            }
        code = block["exit_code"] if status == "ok" else block["exit_code"] or 1
        if status == "timeout":
            run_result = _command("TimeLimitExceeded", block, None)
        elif block.get("truncated"):  # its output cut: no answer to read (the module says why Error)
            run_result = _command("Error", block, code)
            message = (
                f"the program's output passed this server's cap of {limits.max_output_bytes} bytes "
                "(Limits.max_output_bytes): stdout and stderr keep its head and tail; "
                "/v1/run takes a larger limits.max_output_bytes, up to the server's maximum"
            )
        else:
            run_result = _command("Finished", block, code)
    else:  # unsupported (no toolchain here), refused, cancelled: SandboxFusion's Error
        why = error.get("value") or f"the block was {status}"
        return _answer("SandboxError", why, files=files)
    commands = [c for c in (compile_result, run_result) if c is not None]
    failed = any(c["status"] != "Finished" or (c["return_code"] or 0) != 0 for c in commands)
    return _answer("Failed" if failed else "Success", message, compile_result, run_result, files)


def _base64(found: dict[str, str]) -> str:
    if found.get("encoding") == "base64":
        return found["content"]
    return base64.b64encode(found["content"].encode("utf-8")).decode("ascii")


RUN_CODE_ROUTES = [
    ApiRoute(
        "/run_code",
        run_code,
        post=Op(
            "SandboxFusion's /run_code: run one program (its clients work by pointing their URL "
            "here; with a token, the URL carries it: /t/<token>/run_code); a language not run here "
            "answers status SandboxError; limits past the server's maxima are held to them "
            "(the X-Execbox-Clamped header names each)",
            {
                "200": json_answer_of(ref("RunCodeResponse")),
                "400": ERROR,
                "413": ERROR,
                "429": BUSY,
                "503": ERROR,
            },
            body=RunCodeRequest,
        ),
    )
]
