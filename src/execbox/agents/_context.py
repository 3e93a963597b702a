"""How much of a conversation is sent to the model (``model_context=``):
everything (the default), the last N messages, or what fits a token
budget. The system message is always kept, and an assistant message that
called tools is never separated from the tool results that answer it
(a model API refuses one without the other).

    CodeExecutorAgent(..., model_context=BufferedContext(20))
    AssistantAgent(..., model_context=TokenLimitedContext(8000))
    AssistantAgent(..., model_context=20)        # the same as BufferedContext(20)
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .._errors import ConfigurationError

__all__ = ["BufferedContext", "TokenLimitedContext", "bound", "context_policy"]

Message = dict[str, Any]
# Without a tokenizer, about four characters make a token (OpenAI's rule of thumb).
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class BufferedContext:
    """Keep the last ``size`` messages (more when a tool-call group would be cut)."""

    size: int

    def __post_init__(self) -> None:
        if not isinstance(self.size, int) or self.size < 1:
            raise ConfigurationError(f"BufferedContext(size={self.size!r}): a whole number >= 1")

    def keep(self, groups: list[list[Message]]) -> int:
        count = kept = 0
        for group in reversed(groups):
            if kept and count + len(group) > self.size:
                break
            count += len(group)
            kept += 1
        return kept


@dataclass(frozen=True)
class TokenLimitedContext:
    """Keep the latest messages that fit ``max_tokens`` (estimated at four
    characters a token); the newest message is kept whatever its size."""

    max_tokens: int

    def __post_init__(self) -> None:
        if not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ConfigurationError(
                f"TokenLimitedContext(max_tokens={self.max_tokens!r}): a whole number >= 1"
            )

    def keep(self, groups: list[list[Message]]) -> int:
        used = kept = 0
        for group in reversed(groups):
            cost = sum(estimate_tokens(m) for m in group)
            if kept and used + cost > self.max_tokens:
                break
            used += cost
            kept += 1
        return kept


def estimate_tokens(message: Message) -> int:
    text = json.dumps({k: v for k, v in message.items() if k != "thinking_blocks"}, ensure_ascii=False)
    return max(1, len(text) // CHARS_PER_TOKEN)


def context_policy(value: Any) -> BufferedContext | TokenLimitedContext | None:
    """``model_context=`` as a policy: None, a policy, or a number of messages."""
    if value is None or isinstance(value, (BufferedContext, TokenLimitedContext)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return BufferedContext(value)
    raise ConfigurationError(
        f"model_context={value!r}: give a number of messages, BufferedContext(n), "
        "TokenLimitedContext(max_tokens) or None"
    )


def bound(messages: Sequence[Message], policy: BufferedContext | TokenLimitedContext | None) -> list[Message]:
    """The messages (without system messages) the policy keeps, tool-call
    groups whole and the first kept message never a tool result."""
    if policy is None:
        return list(messages)
    groups: list[list[Message]] = []
    for message in messages:
        if message.get("role") == "tool" and groups:
            groups[-1].append(message)
        else:
            groups.append([message])
    kept = policy.keep(groups)
    return [m for group in groups[len(groups) - kept :] for m in group]


def describe(policy: BufferedContext | TokenLimitedContext | None) -> Any:
    if policy is None:
        return None
    if isinstance(policy, BufferedContext):
        return {"type": "buffered", "size": policy.size}
    return {"type": "tokens", "max_tokens": policy.max_tokens}


def from_description(value: Any) -> BufferedContext | TokenLimitedContext | None:
    if value is None:
        return None
    if isinstance(value, dict) and value.get("type") == "buffered":
        return BufferedContext(int(value["size"]))
    if isinstance(value, dict) and value.get("type") == "tokens":
        return TokenLimitedContext(int(value["max_tokens"]))
    return context_policy(value)
