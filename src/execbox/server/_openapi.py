"""The OpenAPI 3.1 document served at ``/openapi.json``: its paths written
here (a test checks that it names every route of the app and only those),
its request and answer bodies generated from the typed models that the
routes validate with (``_bodies``, ``_answer_models``)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from .._version import __version__
from ._bodies import (
    BatchRequest,
    ExecutionRequest,
    ExtractRequest,
    JudgeRequest,
    RunCodeRequest,
    RunRequest,
    SessionRequest,
)
from ._openapi_schemas import BATCH_LINE, STREAM_TEXT, STREAMS, ref, schemas

__all__ = ["BODIES", "openapi"]

# (path, method) -> the model its JSON body is validated with
BODIES: dict[tuple[str, str], type[BaseModel]] = {
    ("/v1/extract", "post"): ExtractRequest,
    ("/v1/run", "post"): RunRequest,
    ("/run_code", "post"): RunCodeRequest,
    ("/v1/batch", "post"): BatchRequest,
    ("/v1/judge", "post"): JudgeRequest,
    ("/v1/sessions", "post"): SessionRequest,
    ("/v1/sessions/{sid}/executions", "post"): ExecutionRequest,
}


def body_of(path: str, method: str = "post") -> dict[str, str]:
    return ref(BODIES[path, method].__name__)


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = {"$ref": "#/components/responses/Error"}
BUSY = {
    "description": "Past --max-concurrency and its line (--max-queue, --max-queue-wait), or --max-sessions; "
    "retry after Retry-After seconds",
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": ref("Error")}},
}
GONE = {
    "description": "The session ended (error.code session_expired, error.reason ttl, idle, deleted "
    "or node_lost), or the execution is no longer kept (execution_gone: error.reason names the budget)",
    "content": {"application/json": {"schema": ref("Error")}},
}
SID = {"name": "sid", "in": "path", "required": True, "schema": {"type": "string"}}
EID = {"name": "eid", "in": "path", "required": True, "schema": {"type": "string"}}
PATH = {
    "name": "path",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "a path inside the session's workspace",
}
SESSION_ERRORS = {"401": ERROR, "404": ERROR, "410": GONE}  # 403 (every op): no or another session's key
KEYED: list[dict[str, list[str]]] = [
    {"bearer": [], "sessionKey": []}
]  # a session's routes: the server's token and the session's key


def _op(
    summary: str,
    responses: dict[str, Any],
    *,
    body: dict[str, Any] | None = None,
    body_required: bool = True,
    params: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    op: dict[str, Any] = {"summary": summary, "responses": {**responses, "401": ERROR, "403": ERROR}}
    if body is not None:
        op["responses"]["415"] = ERROR
        op["requestBody"] = {"required": body_required, "content": {"application/json": {"schema": body}}}
    if params:
        op["parameters"] = params
    return op


def openapi() -> dict[str, Any]:
    document = _document()
    for path, ops in document["paths"].items():
        if path.startswith("/v1/sessions/{sid}"):
            for op in ops.values():
                op["security"] = KEYED
    return document


def _document() -> dict[str, Any]:
    session_ok = _json(ref("Session"))
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "execbox",
            "version": __version__,
            "description": (
                "Run code written by language models. Errors: {error: {code, message, retryable}}."
            ),
        },
        "components": {
            "schemas": schemas(),
            "responses": {"Error": _json(ref("Error"), "An error (see error.code)")},
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the server's token (--token, EXECBOX_TOKEN, or made at start and printed "
                    "in the playground's link)",
                },
                "sessionKey": {
                    "type": "apiKey",
                    "in": "header",
                    "name": "X-Execbox-Session-Key",
                    "description": "a session's key, answered once by POST /v1/sessions",
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/openapi.json": {  # no secret in it: served without the token, as the page is
                "get": {
                    **_op("This document (no token needed)", {"200": _json({"type": "object"})}),
                    "security": [],
                }
            },
            "/": {
                "get": {
                    "summary": "The playground: a page to run a model's reply and watch it (no token needed "
                    "for the page; its API calls send the one of its link, ?token=, or the one "
                    "typed in it)",
                    "security": [],
                    "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
                }
            },
            "/playground/{name}": {
                "get": {
                    "summary": "The playground's script, style and icon",
                    "security": [],
                    "parameters": [
                        {
                            "name": "name",
                            "in": "path",
                            "required": True,
                            "schema": {"enum": ["playground.js", "playground.css", "favicon.svg"]},
                        }
                    ],
                    "responses": {
                        "200": {
                            "description": "the file",
                            "content": {"text/javascript": {}, "text/css": {}, "image/svg+xml": {}},
                        },
                        "404": ERROR,
                    },
                }
            },
            "/v1/extract": {
                "post": _op(
                    "The closed fenced code blocks of a model's reply, in order "
                    "(execbox.extract_code_blocks)",
                    {
                        "200": _json(ref("Extracted")),
                        "400": ERROR,
                        "413": ERROR,
                    },
                    body=body_of("/v1/extract"),
                )
            },
            "/v1/info": {
                "get": _op(
                    "Version, backends, languages, limits, capabilities, load, and pools: per "
                    "executor held (use: idle, running or session) that has a warm pool, its "
                    "health (boxes, boxes_ready, boxes_cleaning, boxes_made, boxes_replaced, "
                    "refills_failed, zygote_restarts, stalls...); [] when none has one",
                    {"200": _json(ref("Info"))},
                )
            },
            "/v1/run": {
                "post": _op(
                    "Run code in a fresh workspace",
                    {
                        "200": _json(ref("ExecutionResult")),
                        "400": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                        "503": ERROR,
                    },
                    body=body_of("/v1/run"),
                )
            },
            "/run_code": {
                "post": _op(
                    "SandboxFusion's /run_code: run one program (its clients work by pointing their URL "
                    "here; with a token, the URL carries it: /t/<token>/run_code); a language not run here "
                    "answers status SandboxError; limits past the server's maxima are held to them "
                    "(the X-Execbox-Clamped header names each)",
                    {
                        "200": _json(ref("RunCodeResponse")),
                        "400": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                        "503": ERROR,
                    },
                    body=body_of("/run_code"),
                )
            },
            "/v1/batch": {
                "post": _op(
                    "Run many requests; NDJSON, one line per request as it finishes (with index)",
                    {
                        "200": {
                            "description": "NDJSON: per request, its index and its result, or its error "
                            "(a request that is not valid answers its own line)",
                            "content": {"application/x-ndjson": {"schema": BATCH_LINE}},
                        },
                        "400": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                    },
                    body=body_of("/v1/batch"),
                )
            },
            "/v1/judge": {
                "post": _op(
                    "Judge a program against test cases: a verdict per case and overall",
                    {"200": _json(ref("JudgeResult")), "400": ERROR, "413": ERROR, "429": BUSY},
                    body=body_of("/v1/judge"),
                )
            },
            "/v1/sessions": {
                "post": _op(
                    "Open a session",
                    {"201": session_ok, "400": ERROR, "413": ERROR, "429": BUSY, "503": ERROR},
                    body=body_of("/v1/sessions"),
                    body_required=False,
                )
            },
            "/v1/sessions/{sid}": {
                "get": _op("A session", {"200": session_ok, **SESSION_ERRORS}, params=[SID]),
                "delete": _op("Close a session", {"200": session_ok, **SESSION_ERRORS}, params=[SID]),
            },
            "/v1/sessions/{sid}/keepalive": {
                "post": _op("Push back the idle expiry", {"200": session_ok, **SESSION_ERRORS}, params=[SID])
            },
            "/v1/sessions/{sid}/reset": {
                "post": _op(
                    "Stop what runs; a new kernel (files stay)",
                    {"200": session_ok, "503": ERROR, **SESSION_ERRORS},
                    params=[SID],
                )
            },
            "/v1/sessions/{sid}/executions": {
                "post": _op(
                    "Run code in the session, one execution at a time (else 409, or wait with ?queue=1). "
                    + STREAM_TEXT,
                    {
                        "200": {
                            "description": "The Execution when it ended, or its events as they happen",
                            "content": {**_json(ref("Execution"))["content"], **STREAMS},
                        },
                        "400": ERROR,
                        "409": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                        "503": ERROR,
                        **SESSION_ERRORS,
                    },
                    body=body_of("/v1/sessions/{sid}/executions"),
                    params=[
                        SID,
                        {
                            "name": "queue",
                            "in": "query",
                            "schema": {"type": "string"},
                            "description": "1 or true: wait for the running execution instead of a 409",
                        },
                    ],
                )
            },
            "/v1/sessions/{sid}/executions/{eid}": {
                "get": _op(
                    "An execution's state",
                    {"200": _json(ref("Execution")), **SESSION_ERRORS},
                    params=[SID, EID],
                )
            },
            "/v1/sessions/{sid}/executions/{eid}/events": {
                "get": _op(
                    "Replay the events after ?after=N (or Last-Event-ID), then follow. " + STREAM_TEXT,
                    {
                        "200": {"description": "The events", "content": STREAMS},
                        "400": ERROR,
                        **SESSION_ERRORS,
                    },
                    params=[
                        SID,
                        EID,
                        {"name": "after", "in": "query", "schema": {"type": "integer", "minimum": 0}},
                        {"name": "Last-Event-ID", "in": "header", "schema": {"type": "string"}},
                    ],
                )
            },
            "/v1/sessions/{sid}/executions/{eid}/cancel": {
                "post": _op(
                    "Kill the execution (its whole process tree)",
                    {"200": _json(ref("Execution")), **SESSION_ERRORS},
                    params=[SID, EID],
                )
            },
            "/v1/sessions/{sid}/files": {
                "get": _op(
                    "List files (recursively)",
                    {"200": _json(ref("FileList")), "400": ERROR, **SESSION_ERRORS},
                    params=[
                        SID,
                        {"name": "path", "in": "query", "schema": {"type": "string", "default": "."}},
                    ],
                )
            },
            "/v1/sessions/{sid}/files/{path}": {
                "get": _op(
                    "Read a file (raw body)",
                    {
                        "200": {
                            "description": "the file",
                            "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}},
                        },
                        "400": ERROR,
                        "413": ERROR,
                        **SESSION_ERRORS,
                    },
                    params=[SID, PATH],
                ),
                "put": {
                    **_op(
                        "Write a file (raw body)",
                        {
                            "200": _json({"type": "object"}, "Replaced"),
                            "201": _json({"type": "object"}, "Created"),
                            "400": ERROR,
                            "413": ERROR,
                            **SESSION_ERRORS,
                        },
                        params=[SID, PATH],
                    ),
                    "requestBody": {
                        "content": {
                            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}
                        }
                    },
                },
                "delete": _op(
                    "Remove a file or an empty folder",
                    {"200": _json({"type": "object"}), "400": ERROR, **SESSION_ERRORS},
                    params=[SID, PATH],
                ),
            },
        },
    }
