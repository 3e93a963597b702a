"""What every execbox agent shares: the four ways to run a task (``run``,
``stream``, ``arun``, ``arun_stream``) over one generator of steps
(``TaskRunner``, which teams share too), and saving its config to a file
and loading it back.

A subclass provides ``_steps(messages, bridge)``, ``to_config`` and
``from_config(config, api_key=, approval=)``. ``stream`` runs the steps
inline; ``arun_stream`` runs them in a thread whose waits go through the
caller's event loop (``_bridge``), so that cancelling it kills what runs.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, Self, TypeVar

from .._errors import ConfigurationError
from ._bridge import Bridge, stream_in_thread
from ._events import Event, Response, TextMessage

__all__ = ["Agent", "TaskInput", "TaskRunner", "task_messages"]

TaskInput = str | TextMessage | dict[str, Any] | Sequence[TextMessage | str | dict[str, Any]]
A = TypeVar("A", bound="Agent")
Item = TypeVar("Item")
Final = TypeVar("Final")


def task_messages(task: TaskInput) -> list[TextMessage]:
    if isinstance(task, (str, TextMessage, dict)):
        return [TextMessage.of(task)]
    messages = [TextMessage.of(item) for item in task]
    if not messages:
        raise ConfigurationError("the task is empty: give a str, a message or a list of messages")
    return messages


class TaskRunner(ABC, Generic[Item, Final]):
    """The four ways to run a task over ``_steps``: its items as they come,
    the last of them a ``final_type`` (what ``run`` and ``arun`` return)."""

    final_type: type[Final]

    @abstractmethod
    def _steps(self, messages: list[TextMessage], bridge: Bridge) -> Iterator[Item]:
        """The items of handling the messages, the last one a ``final_type``."""

    def run(self, task: TaskInput) -> Final:
        """Handle the task (or messages) and return the final item."""
        return _final(self.stream(task), self.final_type)

    def stream(self, task: TaskInput) -> Iterator[Item]:
        """The items of handling the task as they come, then the final one."""
        return self._steps(task_messages(task), Bridge())

    async def arun(self, task: TaskInput) -> Final:
        """``run`` for asyncio; cancelling it kills the code that is running."""
        final = None
        async for item in self.arun_stream(task):
            if isinstance(item, self.final_type):
                final = item
        assert final is not None
        return final

    async def arun_stream(self, task: TaskInput) -> AsyncIterator[Item]:
        """``stream`` for asyncio; cancelling it kills the code that is running."""
        messages = task_messages(task)
        async for item in stream_in_thread(lambda bridge: self._steps(messages, bridge)):
            yield item


class Agent(TaskRunner[Event | Response, Response]):
    name: str  # how teams and messages tell the agents apart
    final_type = Response

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """The agent as JSON-ready data."""

    @classmethod
    @abstractmethod
    def from_config(
        cls: type[A], config: dict[str, Any], *, api_key: str | None = None, approval: Any = None
    ) -> A:
        """The agent ``to_config`` described (the approval function is not data: give it again)."""

    # -- config files -------------------------------------------------------------

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_config(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path, *, api_key: str | None = None, approval: Any = None) -> Self:
        try:
            config = json.loads(Path(path).read_text())
        except ValueError as exc:
            raise ConfigurationError(f"{path} is not JSON: {exc}") from None
        return cls.from_config(config, api_key=api_key, approval=approval)


def _final(items: Iterator[Any], final_type: type[Final]) -> Final:
    final = None
    for item in items:
        if isinstance(item, final_type):
            final = item
    assert final is not None
    return final
