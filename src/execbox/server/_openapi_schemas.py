"""The component schemas of the OpenAPI document, generated from the typed
models of the bodies (``_bodies``) and answers (``_answer_models``), and
the stream shapes (``_openapi`` assembles the paths around them)."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from ._answer_models import ANSWER_MODELS
from ._bodies import REQUEST_MODELS

__all__ = ["BATCH_LINE", "STREAMS", "STREAM_TEXT", "ref", "schemas"]

REF_TEMPLATE = "#/components/schemas/{model}"


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF_TEMPLATE.format(model=name)}


def schemas() -> dict[str, Any]:
    """Every model's JSON schema (and those of the models inside them), by name."""
    _, document = models_json_schema(
        [(model, "validation") for model in (*REQUEST_MODELS, *ANSWER_MODELS)], ref_template=REF_TEMPLATE
    )
    return dict(document["$defs"])


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
BATCH_LINE = {
    "allOf": [
        {"type": "object", "required": ["index"], "properties": {"index": {"type": "integer"}}},
        {"anyOf": [ref("ExecutionResult"), ref("Error")]},
    ]
}
