"""A finished execution's events and result, held once for replay.

While it runs, an execution keeps each event as the stream sent it (its
text bounded by the cap, see ``_executions``); its result then holds the
same text again, in up to three forms (``output``, ``stdout``,
``stderr``) and again per block. Kept for replay like that, one flood
under a 1 MiB cap held 4-5 MiB (security issue 39: 16 kept executions per
session added up to 274 MiB over four sessions). ``keep`` holds it once:

- a block's ``stdout`` or ``stderr`` that equals its ``output`` is that
  same string; the result's ``output``/``stdout``/``stderr``, when they are
  the join of its blocks' (``backends._blocks.aggregate``), are not held
  but joined again when asked (``KeptResult.full``);
- an output event whose text is the next piece of its block's ``output``
  (the result's, for a result without blocks) becomes a ``TextSlice`` of
  it; the first that is not (past the capture's head: the middle was
  dropped) keeps its text, and so do the rest of that block's;
- a display event's data that equals a display's in the result is that
  same string.

Nothing is lost: ``materialized`` gives each event back as it was sent,
with the same id, so that a stream resumed after any event id goes on
exactly. ``footprint`` is what is kept, in bytes, for the budgets
(``_kept``): each string once, each event ``EVENT_COST`` over its text.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._models import BlockResult, ExecutionResult

__all__ = ["END", "EVENT_COST", "KeptResult", "TextSlice", "footprint", "keep_events", "materialized"]

# what one kept event costs the server over its text (the tuple, its dict, the objects), in bytes
EVENT_COST = 256
# what a kept execution costs over its text and events (the objects, its ids, its result's fields)
EXECUTION_COST = 4096
JOINED = ("output", "stdout", "stderr")


class _End:
    """The data of an execution's ``end`` event: its summary, made when sent."""

    def __repr__(self) -> str:
        return "END"


END = _End()


@dataclass(frozen=True, slots=True)
class TextSlice:
    """An output event's text, ``source[start:end]`` (a string the result holds)."""

    source: str
    start: int
    end: int
    block: int

    def data(self) -> dict[str, Any]:
        return {"text": self.source[self.start : self.end], "block": self.block}


class KeptResult:
    """A result held once: see the module's doc."""

    __slots__ = ("_joined", "_result")

    def __init__(self, result: ExecutionResult) -> None:
        blocks = tuple(_one_block(block) for block in result.blocks)
        changes: dict[str, Any] = {"blocks": blocks}
        joined = []
        if blocks:
            for name in JOINED:
                value, parts = getattr(result, name), [getattr(block, name) for block in blocks]
                if len(parts) == 1 and value == parts[0]:
                    changes[name] = parts[0]
                elif len(parts) > 1 and len(value) == sum(map(len, parts)) and value == "".join(parts):
                    changes[name] = ""
                    joined.append(name)
        else:
            changes.update(_shared_streams(result))
        self._result = dataclasses.replace(result, **changes)
        self._joined = tuple(joined)

    def full(self) -> ExecutionResult:
        """The result as it was (its joined texts made again)."""
        if not self._joined:
            return self._result
        blocks = self._result.blocks
        joined: dict[str, Any] = {name: "".join(getattr(b, name) for b in blocks) for name in self._joined}
        return dataclasses.replace(self._result, **joined)

    def held(self) -> ExecutionResult:
        """What is held (the joined texts empty), for ``footprint``."""
        return self._result


def _shared_streams(result: Any) -> dict[str, Any]:
    """``stdout``/``stderr`` that equal ``output``, as that same string."""
    return {name: result.output for name in ("stdout", "stderr") if getattr(result, name) == result.output}


def _one_block(block: BlockResult) -> BlockResult:
    shared = _shared_streams(block)
    return dataclasses.replace(block, **shared) if shared else block


def keep_events(
    events: list[tuple[int, str, Any]], result: ExecutionResult | None
) -> list[tuple[int, str, Any]]:
    """``events`` with what ``result`` also holds as slices or shared strings."""
    if result is None:
        return events
    by_block = {block.index: block.output for block in result.blocks}
    displays = {
        (shown.mime_type, shown.path, shown.data): shown.data
        for shown in (*result.displays, *(d for block in result.blocks for d in block.displays))
    }
    at: dict[int | None, int] = {}  # where the next text of each source should be (-1: out of step)
    kept: list[tuple[int, str, Any]] = []
    for item in events:
        eid, name, data = item
        if name in ("stdout", "stderr") and isinstance(data, dict):
            key = data["block"] if result.blocks else None
            source = by_block.get(data["block"]) if key is not None else result.output
            start, text = at.get(key, 0), data["text"]
            if source is not None and start >= 0 and source.startswith(text, start):
                kept.append((eid, name, TextSlice(source, start, start + len(text), data["block"])))
                at[key] = start + len(text)
                continue
            at[key] = -1
        elif name == "display" and isinstance(data, dict) and data.get("data"):
            same = displays.get((data["mime_type"], data["path"], data["data"]))
            if same is not None:
                item = (eid, name, {**data, "data": same})
        kept.append(item)
    return kept


def materialized(item: tuple[int, str, Any], summary: Any) -> tuple[int, str, Any]:
    """A kept event as it was sent (``summary()`` for the end's data)."""
    eid, name, data = item
    if isinstance(data, TextSlice):
        return eid, name, data.data()
    if data is END:
        return eid, name, summary()
    return item


def footprint(events: list[tuple[int, str, Any]], result: KeptResult | None, extra: Any = None) -> int:
    """The bytes a kept execution holds: each string once, ``EVENT_COST`` an event."""
    seen: set[int] = set()
    total = EXECUTION_COST + EVENT_COST * len(events)
    roots: list[Any] = [result.held() if result is not None else None, extra]
    roots += [data.source if isinstance(data, TextSlice) else data for _, _, data in events]
    for text in _strings(roots):
        if id(text) not in seen:
            seen.add(id(text))
            total += sys.getsizeof(text)
    return total


def _strings(obj: Any) -> Iterator[str]:
    if isinstance(obj, str):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _strings(value)
    elif isinstance(obj, (list, tuple)):
        for value in obj:
            yield from _strings(value)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for field in dataclasses.fields(obj):
            yield from _strings(getattr(obj, field.name))
