"""Approval before code runs: a person or a policy sees the code (or the
tool call) and says yes or no, with a reason the model is told.

    def approve(request: ApprovalRequest) -> bool | Approval:
        if "rm -rf" in request.code:
            return Approval(False, "no deleting files")
        return True

``approval=`` on ``CodeExecutorAgent``, ``AssistantAgent`` and
``Conversation`` takes such a callable, sync or async.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from .._errors import ConfigurationError
from .._models import CodeBlock

__all__ = ["Approval", "ApprovalRequest", "refusal_text"]


@dataclass(frozen=True)
class ApprovalRequest:
    """What is about to run: code blocks (``kind="code"``) or a tool call
    (``kind="tool_call"``: ``tool_name`` and its JSON ``arguments``)."""

    kind: str
    source: str
    code_blocks: tuple[CodeBlock, ...] = ()
    tool_name: str | None = None
    arguments: str | None = None

    @property
    def code(self) -> str:
        """The code as one text (or the tool call's arguments), to show a person."""
        if self.kind == "tool_call":
            return f"{self.tool_name}({self.arguments})"
        return "\n\n".join(f"```{b.language}\n{b.code.rstrip()}\n```" for b in self.code_blocks)


@dataclass(frozen=True)
class Approval:
    """An answer to an ``ApprovalRequest``: approved or not, and why."""

    approved: bool
    reason: str = ""


Approver = Callable[[ApprovalRequest], Any]


def decide(approval: Approver | None, request: ApprovalRequest, awaiter: Callable[[Any], Any]) -> Approval:
    """The approver's answer as an ``Approval``; ``awaiter`` runs an async
    approver's coroutine (on the caller's event loop when there is one)."""
    if approval is None:
        return Approval(True)
    answer = approval(request)
    if inspect.isawaitable(answer):
        answer = awaiter(answer)
    if isinstance(answer, Approval):
        return answer
    if isinstance(answer, bool):
        return Approval(answer)
    raise ConfigurationError(f"approval= must return True, False or an Approval, not {answer!r}")


class Decided(Protocol):
    """A refusal with its reason: an ``Approval``, or the ``ApprovalEvent`` that reported it."""

    @property
    def reason(self) -> str: ...


def refusal_text(decision: Decided) -> str:
    """What the model is told when the run was refused."""
    reason = decision.reason.strip().rstrip(".")
    return "The user refused to run this" + (f": {reason}." if reason else ".") + " Nothing was run."


def check_approver(approval: Any) -> None:
    if approval is not None and not callable(approval):
        raise ConfigurationError(
            "approval= takes a function that gets an ApprovalRequest and returns "
            "True, False or an Approval (or None to run everything)"
        )
