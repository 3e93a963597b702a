"""Server-sent events read by hand (the format is a few lines of the HTML
standard; no dependency for it): text in, ``(id, event, data)`` frames out,
and a frame made the run's typed event. No I/O here.

Comment lines (``: keepalive``) are skipped; a frame of an event this
version does not know is skipped too (a newer server may send more kinds).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .._errors import ServiceError
from .._run_events import RunEvent, event_from_dict

__all__ = ["Frame", "frames", "run_event"]

_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Frame:
    """One server-sent event: its ``id`` (None when it had none), ``event``
    name ("message" when unnamed) and ``data`` (its data lines joined)."""

    id: str | None
    event: str
    data: str


def _lines(chunks: Iterable[str]) -> Iterator[str]:
    """Lines ended by CRLF, LF or CR, however the text was cut in chunks
    (each chunk searched once: an end event carries the whole result)."""
    line: list[str] = []
    after_cr = False  # the last chunk ended with CR: a LF starting this one is its pair
    for chunk in chunks:
        if not chunk:
            continue
        if after_cr and chunk.startswith("\n"):
            chunk = chunk[1:]
        after_cr = chunk.endswith("\r")
        *ended, rest = _BREAK.split(chunk)
        for part in ended:
            line.append(part)
            yield "".join(line)
            line = []
        line.append(rest)
    if "".join(line):
        yield "".join(line)


def frames(chunks: Iterable[str]) -> Iterator[Frame]:
    """The events of a ``text/event-stream`` body given as text chunks."""
    event_id: str | None = None
    name = ""
    data: list[str] = []
    for line in _lines(chunks):
        if not line:
            if data or name:
                yield Frame(event_id, name or "message", "\n".join(data))
            event_id, name, data = None, "", []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            event_id = value


def run_event(frame: Frame) -> RunEvent | None:
    """The typed event of a frame; None for a kind this version does not
    know. A known kind whose data it cannot read is a ServiceError."""
    try:
        data = json.loads(frame.data) if frame.data else {}
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise ServiceError(f"event {frame.id} ({frame.event}) of the stream is not a JSON object: "
                           f"{frame.data[:200]!r}", code="bad_answer")
    try:
        return event_from_dict(frame.event, data)
    except ValueError:  # event_from_dict's answer to an unknown kind
        return None
    except (KeyError, TypeError) as exc:
        raise ServiceError(f"event {frame.id} ({frame.event}) of the stream has data this client cannot read "
                           f"({type(exc).__name__}: {exc}): {frame.data[:200]!r}; is the client older than "
                           "the server?", code="bad_answer") from None
