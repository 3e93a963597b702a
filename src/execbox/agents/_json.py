"""Structured output: a JSON schema for the request, and JSON found in a
plain-text answer when the server cannot enforce the schema."""

from __future__ import annotations

import json
import re
from typing import Any

from .._errors import ModelError

__all__ = ["parse_json_reply", "schema_of"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


def schema_of(schema: Any) -> tuple[str, dict[str, Any]]:
    """(name, JSON schema) for a pydantic model class or a schema dict."""
    if isinstance(schema, dict):
        return str(schema.get("title", "reply")), schema
    to_schema = getattr(schema, "model_json_schema", None)
    if to_schema is None:
        raise TypeError(f"json_schema must be a JSON-schema dict or a pydantic model class, not {schema!r}")
    return schema.__name__, to_schema()


def parse_json_reply(text: str, required: list[str] | None = None) -> dict[str, Any]:
    """The JSON object in a model's reply: the whole text, a ```json fence, or
    the first balanced ``{...}`` in it."""
    candidates = [text.strip()] + [m.strip() for m in _FENCE.findall(text)] + _objects(text)
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and all(key in value for key in (required or [])):
            return value
    want = f" with {', '.join(required)}" if required else ""
    raise ModelError(f"the model's reply holds no JSON object{want}: {text[:300]!r}")


def _objects(text: str) -> list[str]:
    found = []
    for start, char in enumerate(text):
        if char != "{":
            continue
        depth, in_string, escaped = 0, False, False
        for end in range(start, len(text)):
            c = text[end]
            if in_string:
                if escaped:
                    escaped = False
                elif c == "\\":
                    escaped = True
                elif c == '"':
                    in_string = False
            elif c == '"':
                in_string = True
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    found.append(text[start : end + 1])
                    break
    return found
