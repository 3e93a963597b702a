"""When a team's chat stops: conditions on the messages, combined with
``|`` (either one) and ``&`` (all of them, each at its own time).

    stop = TextMentionTermination("TERMINATE") | MaxMessageTermination(10)

A condition is asked after the task is posted and after each agent's turn,
with every message of the run so far (the task included) and the messages
that turn added (none for the task: a task that says "end with TERMINATE"
does not end the chat). It answers with the reason to stop, or None.
``reset()`` starts it over; a team does so at the start of each run.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from .._errors import ConfigurationError
from ._events import TextMessage

__all__ = [
    "FunctionalTermination",
    "MaxMessageTermination",
    "TerminationCondition",
    "TextMentionTermination",
    "termination_condition",
]


class TerminationCondition(ABC):
    """Decides, from the messages, whether a team's chat is over."""

    @abstractmethod
    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        """Why the chat stops now, or None to go on. ``messages``: the run so
        far, task included; ``new``: what the last turn added."""

    def reset(self) -> None:  # noqa: B027 (most conditions keep no state)
        """Forget what earlier checks saw (a team calls it before each run)."""

    def __or__(self, other: TerminationCondition) -> TerminationCondition:
        return _Either(self, _condition(other, "|"))

    def __and__(self, other: TerminationCondition) -> TerminationCondition:
        return _All(self, _condition(other, "&"))


class TextMentionTermination(TerminationCondition):
    """Stops when an agent's message contains ``text`` (from one of
    ``sources`` only, when given). The task itself never stops the chat."""

    def __init__(self, text: str = "TERMINATE", *, sources: Sequence[str] | None = None) -> None:
        if not isinstance(text, str) or not text:
            raise ConfigurationError(f"TextMentionTermination needs the text to look for, got {text!r}")
        if isinstance(sources, str):
            raise ConfigurationError(
                f"TextMentionTermination(sources=...) takes a list of agent names, not the string {sources!r}"
            )
        self.text = text
        self.sources = list(sources) if sources is not None else None

    def __repr__(self) -> str:
        return f"TextMentionTermination({self.text!r}, sources={self.sources!r})"

    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        for message in new:
            if self.sources is not None and message.source not in self.sources:
                continue
            if self.text in message.content:
                return f"{message.source} said {self.text!r}"
        return None


class MaxMessageTermination(TerminationCondition):
    """Stops when the run has ``max_messages`` messages, the task counted."""

    def __init__(self, max_messages: int) -> None:
        if not isinstance(max_messages, int) or isinstance(max_messages, bool) or max_messages < 1:
            raise ConfigurationError(
                f"MaxMessageTermination needs a whole number of messages >= 1, got {max_messages!r}"
            )
        self.max_messages = max_messages

    def __repr__(self) -> str:
        return f"MaxMessageTermination({self.max_messages})"

    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        if len(messages) >= self.max_messages:
            return f"{len(messages)} messages reached (max_messages={self.max_messages})"
        return None


class FunctionalTermination(TerminationCondition):
    """Stops when ``function(messages)`` (every message of the run so far)
    returns something true: a str is the reason given, anything else true
    stops with a reason that names the function."""

    def __init__(self, function: Callable[[Sequence[TextMessage]], object]) -> None:
        if not callable(function):
            raise ConfigurationError(
                f"FunctionalTermination needs a function of the messages, not {function!r}"
            )
        self.function = function
        self.name = getattr(function, "__name__", type(function).__name__)

    def __repr__(self) -> str:
        return f"FunctionalTermination({self.name})"

    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        answer = self.function(list(messages))
        if not answer:
            return None
        return answer if isinstance(answer, str) else f"{self.name}() returned {answer!r}"


class _Either(TerminationCondition):
    def __init__(self, *parts: TerminationCondition) -> None:
        self.parts = parts

    def __repr__(self) -> str:
        return "(" + " | ".join(map(repr, self.parts)) + ")"

    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        # every part sees every turn (an & inside keeps what it saw), the first reason wins
        reasons = [part.check(messages, new) for part in self.parts]
        return next((reason for reason in reasons if reason), None)

    def reset(self) -> None:
        for part in self.parts:
            part.reset()


class _All(TerminationCondition):
    """Stops once every part has fired, on the same turn or on different ones."""

    def __init__(self, *parts: TerminationCondition) -> None:
        self.parts = parts
        self._reasons: dict[int, str] = {}

    def __repr__(self) -> str:
        return "(" + " & ".join(map(repr, self.parts)) + ")"

    def check(self, messages: Sequence[TextMessage], new: Sequence[TextMessage]) -> str | None:
        for index, part in enumerate(self.parts):
            if index not in self._reasons:
                reason = part.check(messages, new)
                if reason:
                    self._reasons[index] = reason
        if len(self._reasons) < len(self.parts):
            return None
        return " and ".join(self._reasons[index] for index in range(len(self.parts)))

    def reset(self) -> None:
        self._reasons.clear()
        for part in self.parts:
            part.reset()


def _condition(value: object, operator: str) -> TerminationCondition:
    if not isinstance(value, TerminationCondition):
        raise ConfigurationError(
            f"a termination condition {operator} {value!r}: combine conditions only "
            "(TextMentionTermination, MaxMessageTermination, FunctionalTermination)"
        )
    return value


def termination_condition(value: object) -> TerminationCondition | None:
    """``termination=`` as given to a team: a condition, a plain function of
    the messages (taken as a ``FunctionalTermination``), or None."""
    if value is None or isinstance(value, TerminationCondition):
        return value
    if callable(value):
        return FunctionalTermination(value)
    raise ConfigurationError(
        f"termination={value!r}: give a condition (TextMentionTermination('TERMINATE'), "
        "MaxMessageTermination(n), FunctionalTermination(f), combined with | and &) "
        "or a function of the messages"
    )
