"""Structured output: a JSON schema for the request, and JSON found in a
plain-text answer when the server cannot enforce the schema.

A reply is the model's text, so hostile: finding the objects in it takes one
pass (``_objects``), a candidate nested deeper than ``MAX_DEPTH`` levels is
not parsed, and the parsing done for one reply is bounded by a multiple of
its length (``_WORK_PER_CHAR``): 100 KB of ``{`` is read in milliseconds."""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from .._errors import ModelError
from ..tools._bounded_json import MAX_DEPTH, text_depth

__all__ = ["parse_json_reply", "schema_of"]

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)
_MARKS = re.compile(r'["\\{}]')  # the only characters that move the search for objects
_WORK_PER_CHAR = 32  # characters parsed for each one of the reply, at most
_WORK_BASE = 1 << 20


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
    the first balanced ``{...}`` in it (each ``{`` in order, its match read
    from there as JSON reads strings), with the ``required`` keys."""
    work = _WORK_PER_CHAR * len(text) + _WORK_BASE
    spans = [(start, end + 1) for start, end, depth in _objects(text) if depth <= MAX_DEPTH]
    candidates = itertools.chain(
        [text.strip()], (m.strip() for m in _FENCE.findall(text)), (text[a:b] for a, b in spans)
    )
    for candidate in candidates:
        work -= len(candidate)
        if work < 0:
            break
        if text_depth(candidate) > MAX_DEPTH:
            continue
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and all(key in value for key in (required or [])):
            return value
    want = f" with {', '.join(required)}" if required else ""
    raise ModelError(f"the model's reply holds no JSON object{want}: {text[:300]!r}")


class _Level:
    """The ``{`` still open at one depth of a reading: where each started,
    and the depth of the deepest object closed inside them."""

    __slots__ = ("inner", "starts")

    def __init__(self, start: int) -> None:
        self.starts = [start]
        self.inner = 0


class _Reading:
    """The text read from some ``{`` on: in a string or not (and the
    position of a character a backslash escapes), and the open levels."""

    __slots__ = ("escaped", "in_string", "levels")

    def __init__(self, start: int) -> None:
        self.in_string = False
        self.escaped = -1
        self.levels = [_Level(start)]

    def key(self) -> tuple[bool, int]:
        return self.in_string, self.escaped


def _objects(text: str) -> list[tuple[int, int, int]]:
    """``(start, end, depth)`` of every ``{`` whose matching ``}`` is found,
    reading from that ``{`` as outside a string, ordered by start; ``depth``
    counts braces, at least the object's own.

    Read at once rather than from each ``{`` in turn (quadratic on a reply
    of ``{``): readings from different starts that reach a position in the
    same state read the same from there on, so at most two are kept (in a
    string and not), merged where they meet, their open levels aligned at
    the top."""
    found: list[tuple[int, int, int]] = []
    readings: list[_Reading] = []
    for mark in _MARKS.finditer(text):
        at, char = mark.start(), mark.group()
        pushed = False
        for reading in readings:
            if reading.in_string:
                if reading.escaped == at:
                    reading.escaped = -1
                    continue
                reading.escaped = -1
                if char == "\\":
                    reading.escaped = at + 1
                elif char == '"':
                    reading.in_string = False
            elif char == '"':
                reading.in_string = True
            elif char == "{":
                reading.levels.append(_Level(at))
                pushed = True
            elif char == "}":
                level = reading.levels.pop()
                depth = level.inner + 1
                found.extend((start, at, depth) for start in level.starts)
                if reading.levels:
                    reading.levels[-1].inner = max(reading.levels[-1].inner, depth)
        readings = [r for r in readings if r.levels]
        if char == "{" and not pushed:
            readings.append(_Reading(at))
        if len(readings) > 1:
            readings = _merged(readings)
    found.sort()
    return found


def _merged(readings: list[_Reading]) -> list[_Reading]:
    """The readings, those in the same state made one."""
    by_key: dict[tuple[bool, int], _Reading] = {}
    for reading in readings:
        other = by_key.get(reading.key())
        if other is None:
            by_key[reading.key()] = reading
            continue
        big, small = (other, reading) if len(other.levels) >= len(reading.levels) else (reading, other)
        for mine, theirs in zip(reversed(big.levels), reversed(small.levels), strict=False):
            if len(mine.starts) < len(theirs.starts):
                mine.starts, theirs.starts = theirs.starts, mine.starts
            mine.starts.extend(theirs.starts)
            mine.inner = max(mine.inner, theirs.inner)
        by_key[reading.key()] = big
    return list(by_key.values())
