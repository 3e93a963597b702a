"""Answers that carry a block's output, encoded and sent in pieces.

An execution's answer holds its output several times over (the result's
``output`` and ``stdout``, again in each block's), each up to the cap.
Encoded whole, as ``JSONResponse`` and ``json.dumps`` do, the answer's text
and then its bytes held about eight times the cap at once, per answer being
sent (security issue 39: 4 floods under a 16 MiB cap grew a worker by 490
MiB). Here the same bytes are made a piece at a time: a long string is
escaped ``PIECE`` characters at a time (JSON escapes each character on its
own, so that the pieces join to exactly ``json.dumps``'s text), and pieces
are sent once they add up to ``PIECE``, each awaited (the server's flow
control holds a slow reader's).

- ``json_answer``: ``JSONResponse``'s answer, byte for byte, with its
  ``Content-Length`` (counted by a first pass that keeps nothing);
- ``sse_frames`` / ``ndjson_frames``: one event of a stream as ``_wire.sse``
  and the NDJSON line would make it; ``json_line``: one line of ``/v1/batch``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Mapping
from itertools import chain
from typing import Any

from starlette.responses import JSONResponse, Response, StreamingResponse

__all__ = ["PIECE", "json_answer", "json_line", "json_pieces", "ndjson_frames", "sse_frames"]

PIECE = 64 << 10  # characters escaped, and bytes sent, at a time
SMALL = 4 * PIECE  # an answer whose strings add up to less is encoded whole (as before)


def json_pieces(
    value: Any,
    *,
    ensure_ascii: bool = True,
    separators: tuple[str, str] = (", ", ": "),
    allow_nan: bool = True,
) -> Iterator[str]:
    """``json.dumps(value, ...)`` with these options, in pieces that join to
    exactly its text; no string longer than ``PIECE`` is escaped at once."""
    item_sep, key_sep = separators

    def dumps(part: Any) -> str:
        return json.dumps(part, ensure_ascii=ensure_ascii, separators=separators, allow_nan=allow_nan)

    def walk(part: Any) -> Iterator[str]:
        if isinstance(part, str):
            if len(part) <= PIECE:
                yield dumps(part)
                return
            yield '"'
            for start in range(0, len(part), PIECE):
                yield dumps(part[start : start + PIECE])[1:-1]
            yield '"'
        elif isinstance(part, dict) and part and all(isinstance(key, str) for key in part):
            yield "{"
            for n, (key, item) in enumerate(part.items()):
                yield (item_sep if n else "") + dumps(key) + key_sep
                yield from walk(item)
            yield "}"
        elif isinstance(part, (list, tuple)) and part:
            yield "["
            for n, item in enumerate(part):
                if n:
                    yield item_sep
                yield from walk(item)
            yield "]"
        else:  # numbers, true, false, null, empty containers, keys json.dumps converts
            yield dumps(part)

    return walk(value)


def _packed(texts: Iterator[str]) -> Iterator[bytes]:
    """Pieces of text as UTF-8 bytes, about ``PIECE`` at a time."""
    held: list[str] = []
    size = 0
    for text in texts:
        held.append(text)
        size += len(text)
        if size >= PIECE:
            yield "".join(held).encode("utf-8")
            held, size = [], 0
    if held:
        yield "".join(held).encode("utf-8")


def _text_size(value: Any) -> int:
    """The characters of the strings ``value`` holds (a bound on what encoding it whole costs)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(len(key) if isinstance(key, str) else 0 for key in value) + sum(
            _text_size(item) for item in value.values()
        )
    if isinstance(value, (list, tuple)):
        return sum(_text_size(item) for item in value)
    return 0


async def _sent(pieces: Iterator[bytes]) -> AsyncIterator[bytes]:
    for piece in pieces:
        yield piece


def json_answer(content: Any, status_code: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """``JSONResponse(content, status_code, headers)``'s answer, the same
    bytes and headers; sent in pieces when it is large."""
    if _text_size(content) < SMALL:
        return JSONResponse(content, status_code=status_code, headers=headers)
    options: dict[str, Any] = {"ensure_ascii": False, "separators": (",", ":"), "allow_nan": False}
    length = sum(len(piece) for piece in _packed(json_pieces(content, **options)))
    return StreamingResponse(
        _sent(_packed(json_pieces(content, **options))),
        status_code=status_code,
        headers={**(headers or {}), "content-length": str(length)},
        media_type=JSONResponse.media_type,
    )


def sse_frames(event_id: int, event: str, data: Any) -> Iterator[bytes]:
    """``_wire.sse(event_id, event, data)`` in pieces."""
    head = f"id: {event_id}\nevent: {event}\ndata: "
    if _text_size(data) < SMALL:
        return iter([f"{head}{json.dumps(data)}\n\n".encode()])
    return _packed(chain([head], json_pieces(data), ["\n\n"]))


def ndjson_frames(event_id: int, event: str, data: Any) -> Iterator[bytes]:
    """The NDJSON line ``{"id", "event", "data"}`` of one event, in pieces."""
    return json_line({"id": event_id, "event": event, "data": data})


def json_line(value: Any) -> Iterator[bytes]:
    """``json.dumps(value) + "\\n"`` (an NDJSON line) in pieces."""
    if _text_size(value) < SMALL:
        return iter([json.dumps(value).encode() + b"\n"])
    return _packed(chain(json_pieces(value), ["\n"]))
