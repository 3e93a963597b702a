"""The OpenAPI 3.1 document served at ``/openapi.json``, written by hand
(a test checks that it names every route of the app and only those)."""

from __future__ import annotations

from typing import Any

from .._version import __version__

__all__ = ["openapi"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = {"$ref": "#/components/responses/Error"}
BUSY = {
    "description": "Over --max-concurrency or --max-sessions; retry after Retry-After seconds",
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": _ref("Error")}},
}
GONE = {
    "description": "The session ended: error.reason is ttl, idle or deleted",
    "content": {"application/json": {"schema": _ref("Error")}},
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


BLOCK = {
    "type": "object",
    "required": ["code"],
    "properties": {
        "code": {"type": "string"},
        "language": {"type": "string"},
        "filename": {"type": "string"},
    },
}
FILES = {
    "type": "object",
    "description": "workspace path -> file",
    "additionalProperties": {
        "type": "object",
        "required": ["content"],
        "properties": {
            "content": {"type": "string"},
            "encoding": {"enum": ["utf-8", "base64"], "default": "utf-8"},
        },
    },
}
FETCHED = {
    "type": "object",
    "description": "fetch_files: path -> the file, or why it could not be read",
    "additionalProperties": {
        "oneOf": [
            FILES["additionalProperties"],
            {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        ]
    },
}
LIMITS = {
    "type": "object",
    "properties": {
        "timeout_s": {"type": "number"},
        "memory_mb": {"type": ["integer", "null"]},
        "max_processes": {"type": ["integer", "null"]},
        "max_output_bytes": {"type": "integer"},
        "network": {"type": ["boolean", "null"]},
        "cpus": {"type": ["number", "null"]},
    },
}
CODE = {
    "language": {"type": "string", "default": "python"},
    "code": {"type": "string"},
    "blocks": {"type": "array", "items": BLOCK},
}

SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "retryable"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "retryable": {"type": "boolean"},
                    "reason": {"enum": ["ttl", "idle", "deleted"]},
                },
            }
        },
    },
    "RunRequest": {
        "type": "object",
        "description": "give code or blocks",
        "properties": {
            **CODE,
            "files": FILES,
            "limits": LIMITS,
            "backend": {"type": "string"},
            "fetch_files": {"type": "array", "items": {"type": "string"}},
        },
    },
    "ExecutionResult": {
        "type": "object",
        "description": "ExecutionResult.to_dict(); /v1/run adds file_contents",
        "required": ["exit_code", "output", "stdout", "stderr", "error"],
        "properties": {
            "exit_code": {"type": "integer"},
            "output": {"type": "string"},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "error": {"type": ["object", "null"]},
            "blocks": {"type": "array"},
            "files": {"type": "array", "items": {"type": "string"}},
            "file_contents": FETCHED,
        },
    },
    "SessionRequest": {
        "type": "object",
        "properties": {
            "backend": {"type": "string"},
            "limits": LIMITS,
            "ttl_s": {"type": "number"},
            "idle_ttl_s": {"type": "number"},
            "env": {"type": "object", "additionalProperties": {"type": "string"}},
            "files": FILES,
            "keep_code_files": {"type": "boolean"},
            "execution_policies": {
                "type": "object",
                "description": "language -> execute | save | refuse",
                "additionalProperties": {"enum": ["execute", "save", "refuse"]},
            },
        },
    },
    "Session": {
        "type": "object",
        "required": ["id", "expires_at", "idle_expires_at"],
        "properties": {
            "id": {"type": "string"},
            "state": {"enum": ["open", "deleted"]},
            "backend": {"type": "string"},
            "expires_at": {"type": "string", "format": "date-time"},
            "idle_expires_at": {"type": "string", "format": "date-time"},
            "running_execution": {"type": ["string", "null"]},
            "key": {
                "type": "string",
                "description": "the session's secret, in the answer of POST /v1/sessions only: "
                "send it as X-Execbox-Session-Key on every request on the "
                "session (else 403 session_key_required)",
            },
        },
    },
    "ExecutionRequest": {"type": "object", "properties": CODE},
    "Execution": {
        "type": "object",
        "description": "also the data of the SSE end event",
        "properties": {
            "id": {"type": "string"},
            "session_id": {"type": "string"},
            "status": {"enum": ["running", "completed", "cancelled", "failed"]},
            "result": {"oneOf": [_ref("ExecutionResult"), {"type": "null"}]},
            "error": {"type": ["object", "null"]},
        },
    },
    "FileList": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "files": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "type": {"enum": ["file", "dir"]},
                        "size": {"type": "integer"},
                        "mtime": {"type": "number"},
                        "mime": {"type": ["string", "null"]},
                    },
                },
            },
        },
    },
}

EVENTS = ["start", "block_start", "stdout", "stderr", "display", "block_end", "truncated", "end"]
EVENT_DATA = {"type": "object", "description": "end's is the Execution"}
STREAMS = {  # Accept: text/event-stream or application/x-ndjson; the schema of one event (OpenAPI 3.1)
    "text/event-stream": {
        "schema": {
            "type": "object",
            "required": ["id", "event", "data"],
            "properties": {
                "id": {"type": "string", "pattern": "^[0-9]+$"},
                "event": {"enum": EVENTS},
                "data": {
                    "type": "string",
                    "contentMediaType": "application/json",
                    "contentSchema": EVENT_DATA,
                },
            },
        }
    },
    "application/x-ndjson": {
        "schema": {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["id", "event", "data"],
                    "properties": {
                        "id": {"type": "integer", "minimum": 1},
                        "event": {"enum": EVENTS},
                        "data": EVENT_DATA,
                    },
                },
                {"type": "object", "required": ["event"], "properties": {"event": {"const": "keepalive"}}},
            ]
        }
    },
}
STREAM_TEXT = (
    "Events, each with an id: " + ", ".join(EVENTS) + ". Accept: text/event-stream: server-sent events "
    "(data: one line of JSON), a ': keepalive' comment every keepalive period; Accept: "
    'application/x-ndjson: lines {id, event, data}, a {"event": "keepalive"} line'
)
INFO = {
    "type": "object",
    "required": ["version", "backends", "limits", "capabilities", "load", "pools"],
    "properties": {
        "pools": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["backend", "use", "health"],
                "properties": {
                    "backend": {"type": "string"},
                    "use": {"enum": ["idle", "running", "session"]},
                    "session_id": {"type": "string"},
                    "health": {"type": "object"},
                },
            },
        }
    },
}
BATCH_LINE = {
    "allOf": [
        {"type": "object", "required": ["index"], "properties": {"index": {"type": "integer"}}},
        {"anyOf": [_ref("ExecutionResult"), _ref("Error")]},
    ]
}


def openapi() -> dict[str, Any]:
    document = _document()
    for path, ops in document["paths"].items():
        if path.startswith("/v1/sessions/{sid}"):
            for op in ops.values():
                op["security"] = KEYED
    return document


def _document() -> dict[str, Any]:
    session_ok = _json(_ref("Session"))
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
            "schemas": SCHEMAS,
            "responses": {"Error": _json(_ref("Error"), "An error (see error.code)")},
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
            "/openapi.json": {"get": _op("This document", {"200": _json({"type": "object"})})},
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
                        "200": _json(
                            {
                                "type": "object",
                                "required": ["blocks"],
                                "properties": {
                                    "blocks": {
                                        "type": "array",
                                        "items": {
                                            "type": "object",
                                            "properties": {
                                                "language": {"type": "string"},
                                                "code": {"type": "string"},
                                                "filename": {"type": ["string", "null"]},
                                                "language_inferred": {"type": "boolean"},
                                            },
                                        },
                                    }
                                },
                            }
                        ),
                        "400": ERROR,
                        "413": ERROR,
                    },
                    body={"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}},
                )
            },
            "/v1/info": {
                "get": _op(
                    "Version, backends, languages, limits, capabilities, load, and pools: per "
                    "executor held (use: idle, running or session) that has a warm pool, its "
                    "health (units_ready, units_asked, units_made, refills_failed, "
                    "zygote_restarts, stalls...); [] when none has one",
                    {"200": _json(INFO)},
                )
            },
            "/v1/run": {
                "post": _op(
                    "Run code in a fresh workspace",
                    {
                        "200": _json(_ref("ExecutionResult")),
                        "400": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                        "503": ERROR,
                    },
                    body=_ref("RunRequest"),
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
                    body={
                        "type": "object",
                        "required": ["requests"],
                        "properties": {
                            "requests": {"type": "array", "items": _ref("RunRequest")},
                            "max_concurrency": {"type": "integer", "minimum": 1},
                        },
                    },
                )
            },
            "/v1/sessions": {
                "post": _op(
                    "Open a session",
                    {"201": session_ok, "400": ERROR, "413": ERROR, "429": BUSY, "503": ERROR},
                    body=_ref("SessionRequest"),
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
                            "content": {**_json(_ref("Execution"))["content"], **STREAMS},
                        },
                        "400": ERROR,
                        "409": ERROR,
                        "413": ERROR,
                        "429": BUSY,
                        "503": ERROR,
                        **SESSION_ERRORS,
                    },
                    body=_ref("ExecutionRequest"),
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
                    {"200": _json(_ref("Execution")), **SESSION_ERRORS},
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
                    {"200": _json(_ref("Execution")), **SESSION_ERRORS},
                    params=[SID, EID],
                )
            },
            "/v1/sessions/{sid}/files": {
                "get": _op(
                    "List files (recursively)",
                    {"200": _json(_ref("FileList")), "400": ERROR, **SESSION_ERRORS},
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
