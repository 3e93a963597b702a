"""What a model answers, whichever API it speaks: text, a thought kept
apart, function calls, usage. The agents keep their context in the OpenAI
chat format; each client translates to its own API."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..tools import _bounded_json as bounded_json
from ._usage import Usage

__all__ = ["ModelReply", "ToolCall", "assistant_message"]

# Keys of a context message that a chat-completions server understands; the
# rest (such as Anthropic's signed thinking blocks) stay on our side.
OPENAI_MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")


@dataclass(frozen=True)
class ToolCall:
    """One function call the model asked for: its id (sent back with the
    result), the tool's name and the arguments as the model wrote them (JSON)."""

    id: str
    name: str
    arguments: str

    def parsed(self) -> Any:
        """The arguments as data; ``ValueError`` when they are not JSON or
        nest deeper than ``MAX_DEPTH`` levels (``TooDeep``)."""
        return bounded_json.loads(self.arguments) if self.arguments.strip() else {}

    def to_openai(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class ModelReply:
    """What the model answered: ``content``, the ``thought`` it sent apart
    (``reasoning_content``, a leading ``<think>`` block, or Anthropic's
    thinking blocks), the ``tool_calls`` it asked for, and the usage.
    ``thinking_blocks`` keeps Anthropic's signed blocks to send back."""

    content: str
    thought: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    finish_reason: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    thinking_blocks: tuple[dict[str, Any], ...] = ()


def assistant_message(reply: ModelReply) -> dict[str, Any]:
    """The reply as a context message, ready to be sent back next turn."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [call.to_openai() for call in reply.tool_calls]
    if reply.thinking_blocks:
        message["thinking_blocks"] = [dict(block) for block in reply.thinking_blocks]
    return message
