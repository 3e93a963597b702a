"""What agents say and what happens on the way: messages, events, the final
response. Plain frozen data, so a stream can be printed, logged or sent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .._models import CodeBlock, ExecutionResult
from ._approval import ApprovalRequest
from ._reply import ToolCall
from ._usage import Usage

__all__ = [
    "ApprovalEvent",
    "CodeExecutionEvent",
    "CodeGenerationEvent",
    "Event",
    "Response",
    "RetryDecisionEvent",
    "StreamChunkEvent",
    "TextMessage",
    "ThoughtEvent",
    "ToolCallEvent",
    "ToolResultEvent",
]


@dataclass(frozen=True)
class TextMessage:
    """A message in a conversation: who sent it and what it says."""

    source: str
    content: str

    @classmethod
    def of(cls, value: TextMessage | str | dict[str, Any], default_source: str = "user") -> TextMessage:
        if isinstance(value, TextMessage):
            return value
        if isinstance(value, str):
            return cls(default_source, value)
        if isinstance(value, dict) and isinstance(value.get("content"), str):
            return cls(
                str(value.get("source") or value.get("name") or value.get("role") or default_source),
                value["content"],
            )
        raise TypeError(f"a message is a TextMessage, a str or a dict with 'content', not {value!r}")


@dataclass(frozen=True)
class ThoughtEvent:
    """Reasoning the model sent apart from its answer."""

    source: str
    content: str


@dataclass(frozen=True)
class StreamChunkEvent:
    """A piece of the model's answer as it is written."""

    source: str
    content: str


@dataclass(frozen=True)
class CodeGenerationEvent:
    """The model wrote code (``retry_attempt`` 0 is the first try)."""

    source: str
    retry_attempt: int
    content: str
    code_blocks: tuple[CodeBlock, ...]


@dataclass(frozen=True)
class CodeExecutionEvent:
    """The code ran: the full result, and ``output`` as the model reads it."""

    source: str
    retry_attempt: int
    result: ExecutionResult
    output: str


@dataclass(frozen=True)
class RetryDecisionEvent:
    """After a failure, whether the model chose to try again, and why."""

    source: str
    retry_attempt: int
    retry: bool
    reason: str


@dataclass(frozen=True)
class Response:
    """The agent's final answer, with the events that led to it and the
    model usage of this call."""

    message: TextMessage
    inner: tuple[Event, ...] = ()
    usage: Usage = field(default_factory=Usage)

    @property
    def content(self) -> str:
        return self.message.content


@dataclass(frozen=True)
class ToolCallEvent:
    """The model asked for function calls (``iteration`` 0 is the first round)."""

    source: str
    iteration: int
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class ToolResultEvent:
    """A tool call's result as the model reads it; ``is_error`` when the
    call could not run (unknown tool, refused, bad arguments, a failure)."""

    source: str
    call_id: str
    name: str
    content: str
    is_error: bool = False


@dataclass(frozen=True)
class ApprovalEvent:
    """The approver's answer before code or a tool call ran."""

    source: str
    request: ApprovalRequest
    approved: bool
    reason: str = ""


Event = (
    ThoughtEvent
    | StreamChunkEvent
    | CodeGenerationEvent
    | CodeExecutionEvent
    | RetryDecisionEvent
    | ToolCallEvent
    | ToolResultEvent
    | ApprovalEvent
)
