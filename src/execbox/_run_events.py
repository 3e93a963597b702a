"""What a run reports while it runs: typed events, one sink for all of them.

``executor.stream(blocks)`` / ``astream`` yield them; ``run(blocks,
on_event=...)`` hands them to a callable; the HTTP service sends them as
server-sent events, and ``execbox.Client`` reads them back into the same
classes (``event_from_dict``). In order, for a run::

    StartEvent                       once
    BlockStartEvent                  per block reached
      OutputEvent / DisplayEvent     as the block prints or displays
    BlockEndEvent                    per block reached
    EndEvent                         once, with the whole ExecutionResult

``OutputEvent.text`` is the text as it came (two writes may come as one
event, one write as two); the result keeps the bounded capture. A
``TruncatedEvent`` comes from the service only: it stops streaming text
past a bound (the result still has the capped output).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, cast

from ._models import BlockResult, Display, ErrorInfo, ExecutionResult

__all__ = [
    "BlockEndEvent",
    "BlockStartEvent",
    "DisplayEvent",
    "EndEvent",
    "EventSink",
    "OutputEvent",
    "RunEvent",
    "StartEvent",
    "TruncatedEvent",
    "event_from_dict",
]


class RunEvent:
    """What every event of a run is; ``kind`` names it on the wire."""

    __slots__ = ()
    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class StartEvent(RunEvent):
    """The run began: ``blocks`` blocks to run (the service adds its ids)."""

    kind: ClassVar[str] = "start"
    blocks: int
    execution_id: str | None = None
    session_id: str | None = None


@dataclass(frozen=True)
class BlockStartEvent(RunEvent):
    """Block ``index`` (its ``language``) starts."""

    kind: ClassVar[str] = "block_start"
    index: int
    language: str


@dataclass(frozen=True)
class OutputEvent(RunEvent):
    """Text block ``block`` printed on ``stream`` ("stdout" or "stderr");
    ``kind`` is the stream's name."""

    stream: str
    text: str
    block: int = 0

    @property
    def kind(self) -> str:  # type: ignore[override]  # read like the others' class attribute
        return self.stream


@dataclass(frozen=True)
class DisplayEvent(RunEvent):
    """A rich output of block ``block`` (an image saved to a file, JSON, a
    value): its ``display``."""

    kind: ClassVar[str] = "display"
    display: Display
    block: int = 0


@dataclass(frozen=True)
class BlockEndEvent(RunEvent):
    """Block ``index`` ended: how, in short (the result has all of it)."""

    kind: ClassVar[str] = "block_end"
    index: int
    language: str
    status: str
    exit_code: int
    duration_s: float
    error: ErrorInfo | None = None
    timed_out: bool = False
    truncated: bool = False

    @classmethod
    def of(cls, block: BlockResult) -> BlockEndEvent:
        return cls(
            block.index,
            block.language,
            block.status,
            block.exit_code,
            block.duration_s,
            block.error,
            block.timed_out,
            block.truncated,
        )


@dataclass(frozen=True)
class TruncatedEvent(RunEvent):
    """The service stopped streaming text after ``after_bytes`` bytes."""

    kind: ClassVar[str] = "truncated"
    after_bytes: int
    note: str = ""


@dataclass(frozen=True)
class EndEvent(RunEvent):
    """The run is over: always the last event. ``status`` is "completed",
    "cancelled" or (from the service, when execbox itself failed)
    "failed" with ``error`` ({code, message, retryable}) and maybe no result."""

    kind: ClassVar[str] = "end"
    result: ExecutionResult | None
    status: str = "completed"
    error: dict[str, Any] | None = None


def event_to_dict(event: RunEvent) -> dict[str, Any]:
    """The event's data as the service sends it (its ``kind`` apart)."""
    if isinstance(event, OutputEvent):
        return {"text": event.text, "block": event.block}
    if isinstance(event, DisplayEvent):
        return {
            "block": event.block,
            "mime_type": event.display.mime_type,
            "path": event.display.path,
            "data": event.display.data,
        }
    if isinstance(event, EndEvent):
        return {
            "status": event.status,
            "result": event.result.to_dict() if event.result is not None else None,
            "error": event.error,
        }
    if isinstance(event, BlockEndEvent):
        error = event.error
        return {
            "index": event.index,
            "language": event.language,
            "status": event.status,
            "exit_code": event.exit_code,
            "duration_s": event.duration_s,
            "timed_out": event.timed_out,
            "truncated": event.truncated,
            "error": None
            if error is None
            else {"name": error.name, "value": error.value, "traceback": error.traceback},
        }
    return {
        f.name: getattr(event, f.name) for f in dataclasses.fields(cast(Any, event))
    }  # each is a dataclass


def event_from_dict(kind: str, data: dict[str, Any]) -> RunEvent:
    """The event the service sent as ``kind`` with ``data``; ValueError for
    a kind this version does not know."""
    if kind in ("stdout", "stderr"):
        return OutputEvent(kind, data.get("text", ""), data.get("block", 0))
    if kind == "display":
        return DisplayEvent(
            Display(data["mime_type"], data.get("path"), data.get("data")), data.get("block", 0)
        )
    if kind == "end":
        result = data.get("result")
        return EndEvent(
            ExecutionResult.from_dict(result) if result is not None else None,
            data.get("status", "completed"),
            data.get("error"),
        )
    if kind == "block_end":
        error = data.get("error")
        return BlockEndEvent(
            data["index"],
            data.get("language", ""),
            data["status"],
            data["exit_code"],
            data.get("duration_s", 0.0),
            ErrorInfo(**error) if error else None,
            data.get("timed_out", False),
            data.get("truncated", False),
        )
    kinds: dict[str, Any] = {"start": StartEvent, "block_start": BlockStartEvent, "truncated": TruncatedEvent}
    if kind not in kinds:
        raise ValueError(f"unknown event {kind!r}")
    cls = kinds[kind]
    return cls(**{f.name: data[f.name] for f in dataclasses.fields(cls) if f.name in data})


class EventSink:
    """Where a run's events go: callable as the backends' ``on_output(stream,
    text)``, plus ``display`` and ``emit``; it knows the block that runs.
    Called from the thread that runs the blocks."""

    def __init__(
        self,
        on_event: Callable[[RunEvent], object] | None,
        on_output: Callable[[str, str], None] | None = None,
    ) -> None:
        self._on_event = on_event
        self._on_output = on_output
        self.block = 0
        self._displayed: set[int] = set()  # blocks whose displays were sent as they came
        self._lock = threading.Lock()

    def __call__(self, stream: str, text: str) -> None:
        if self._on_output is not None:
            self._on_output(stream, text)
        if self._on_event is not None:
            self._on_event(OutputEvent(stream, text, self.block))

    def display(self, display: Display) -> None:
        with self._lock:
            self._displayed.add(self.block)
        if self._on_event is not None:
            self._on_event(DisplayEvent(display, self.block))

    def emit(self, event: RunEvent) -> None:
        if self._on_event is not None:
            self._on_event(event)

    def block_ended(self, block: BlockResult) -> None:
        """After a block: its displays not sent as they came (a backend that
        finds them in the result), then its end."""
        if self._on_event is None:
            return
        if block.index not in self._displayed:
            for display in block.displays:
                self._on_event(DisplayEvent(display, block.index))
        self._on_event(BlockEndEvent.of(block))
