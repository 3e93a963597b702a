"""The component schemas and stream shapes of the OpenAPI document
(``_openapi`` assembles the paths around them)."""

from __future__ import annotations

from typing import Any

__all__ = ["BATCH_LINE", "INFO", "SCHEMAS", "STREAMS", "STREAM_TEXT", "ref"]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


BLOCK = {
    "type": "object",
    "required": ["code"],
    "properties": {
        "code": {"type": "string"},
        "language": {"type": "string"},
        "filename": {"type": "string"},
        "stdin": {"type": "string", "description": "the program's standard input"},
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
GPUS = {
    "description": "NVIDIA GPUs for the blocks (sandbox, docker): 'all', an index, a UUID, or a list; "
    "within the server's --allow-gpus",
    "oneOf": [
        {"type": "string"},
        {"type": "integer", "minimum": 0},
        {"type": "array", "items": {"type": ["string", "integer"]}},
        {"type": "null"},
    ],
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
        "gpu_memory_mb": {"type": ["integer", "null"]},
        "compile_timeout_s": {"type": "number"},
    },
}
CODE = {
    "language": {"type": "string", "default": "python"},
    "code": {"type": "string"},
    "stdin": {"type": "string", "description": "the program's standard input (with code)"},
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
    "JudgeRequest": {
        "type": "object",
        "required": ["code", "language", "cases"],
        "properties": {
            "code": {"type": "string"},
            "language": {"type": "string"},
            "cases": {
                "type": "array",
                "maxItems": 1000,
                "items": {
                    "type": "object",
                    "properties": {
                        "stdin": {"type": "string"},
                        "expected_stdout": {"type": "string"},
                        "checker": {
                            "type": "object",
                            "required": ["code"],
                            "properties": {"code": {"type": "string"}, "language": {"type": "string"}},
                        },
                        "name": {"type": "string"},
                    },
                },
            },
            "compare": {"enum": ["lines", "exact", "whitespace", "float"], "default": "lines"},
            "tolerance": {"type": "number", "default": 1e-6},
            "stop_on_failure": {"type": "boolean", "default": True},
            "limits": LIMITS,
            "backend": {"type": "string"},
        },
    },
    "JudgeResult": {
        "type": "object",
        "properties": {
            "verdict": {"type": "string"},
            "language": {"type": "string"},
            "passed": {"type": "integer"},
            "total": {"type": "integer"},
            "duration_s": {"type": "number"},
            "backend": {"type": "string"},
            "compile_output": {"type": "string"},
            "cases": {"type": "array", "items": {"type": "object"}},
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
            "gpus": GPUS,
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
            "gpus": GPUS,
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
            "result": {"oneOf": [ref("ExecutionResult"), {"type": "null"}]},
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
        {"anyOf": [ref("ExecutionResult"), ref("Error")]},
    ]
}
