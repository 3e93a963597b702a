"""Server-sent events read by hand (the format is a few lines of the HTML
standard; no dependency for it): text in, ``(id, event, data)`` frames out,
and a frame made the run's typed event. No I/O here.

Comment lines (``: keepalive``) are skipped; a frame of an event this
version does not know is skipped too (a newer server may send more kinds).
A line, or a frame, longer than ``limit`` characters (the client's
``max_answer_bytes``) is a ``ServiceError`` (too_large), never held whole:
a stream that never ends its line would fill the memory. A known event's
data is checked field by field (``_answers``) before it is made an object.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .._errors import ServiceError
from .._run_events import RunEvent, event_from_dict
from ._answers import bad_answer, check_event, parse_json
from ._http import MAX_ANSWER_BYTES

__all__ = ["Frame", "frames", "lines", "run_event"]

_BREAK = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Frame:
    """One server-sent event: its ``id`` (None when it had none), ``event``
    name ("message" when unnamed) and ``data`` (its data lines joined)."""

    id: str | None
    event: str
    data: str


def _too_long(what: str, limit: int) -> ServiceError:
    return ServiceError(
        f"a {what} of the server's stream is over {limit} characters, this client's most "
        "(Client(max_answer_bytes=...)); is this execbox serve?",
        code="too_large",
    )


def lines(chunks: Iterable[str], limit: int = MAX_ANSWER_BYTES) -> Iterator[str]:
    """Lines ended by CRLF, LF or CR, however the text was cut in chunks
    (each chunk searched once: an end event carries the whole result); one
    over ``limit`` characters is too_large."""
    line: list[str] = []
    size = 0
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
            if size + len(part) > limit:
                raise _too_long("line", limit)
            yield "".join(line)
            line, size = [], 0
        line.append(rest)
        size += len(rest)
        if size > limit:
            raise _too_long("line", limit)
    if size:
        yield "".join(line)


def frames(chunks: Iterable[str], limit: int = MAX_ANSWER_BYTES) -> Iterator[Frame]:
    """The events of a ``text/event-stream`` body given as text chunks."""
    event_id: str | None = None
    name = ""
    data: list[str] = []
    size = 0
    for line in lines(chunks, limit):
        if not line:
            if data or name:
                yield Frame(event_id, name or "message", "\n".join(data))
            event_id, name, data, size = None, "", [], 0
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            size += len(value) + 1
            if size > limit:
                raise _too_long("event", limit)
            data.append(value)
        elif field == "event":
            name = value
        elif field == "id" and "\0" not in value:
            event_id = value


def run_event(frame: Frame) -> RunEvent | None:
    """The typed event of a frame; None for a kind this version does not
    know. A known kind whose data it cannot read is a ServiceError."""
    what = f"event {frame.id!r:.40} ({frame.event!r:.40}) of the stream"
    data = parse_json(frame.data, what) if frame.data else {}
    if not isinstance(data, dict):
        raise bad_answer(what, f"it is not a JSON object: {frame.data[:200]!r}")
    check_event(frame.event, data, what)
    try:
        return event_from_dict(frame.event, data)
    except ValueError:  # event_from_dict's answer to an unknown kind
        return None
    except (KeyError, TypeError) as exc:
        raise bad_answer(
            what,
            f"it has data this client cannot read ({type(exc).__name__}: {exc}): "
            f"{frame.data[:200]!r}; is the client older than the server?",
        ) from None
