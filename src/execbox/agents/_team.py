"""A team of agents in one chat: each turn one agent gets the messages it has
not seen yet (everyone else's, since its last turn), answers, and its
answer goes to all; a termination condition, checked after every turn,
ends the run.

    team = RoundRobinGroupChat([coder, executor],
                               termination=TextMentionTermination("TERMINATE") | MaxMessageTermination(12))
    result = team.run("Compute the 10th Fibonacci number.")
    result.messages, result.stop_reason

``RoundRobinGroupChat`` lets the agents speak in turn; ``SelectorGroupChat``
(``_selector``) has a model or a function pick the next speaker. The team's
``run``/``stream``/``arun``/``arun_stream`` work as an agent's do: the stream
yields each message, the agents' events and ``SpeakerSelectionEvent``, then
the ``TeamResult``; cancelling the async forms kills the code that runs.
Agents keep their own context between turns and runs; ``reset()`` clears
the team and them. ``initiate_chat(sender, recipient, message)`` is AG2's
two-agent form: ``sender`` posts the task, ``recipient`` answers first.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass, field

from .._errors import ConfigurationError
from ._agent import Agent, TaskRunner
from ._bridge import Bridge
from ._conversation import UNATTENDED_MAX_TURNS
from ._events import Event, Response, TextMessage
from ._termination import TerminationCondition, TextMentionTermination, termination_condition
from ._usage import Usage

__all__ = ["GroupChat", "RoundRobinGroupChat", "SpeakerSelectionEvent", "TeamResult", "initiate_chat"]


@dataclass(frozen=True)
class SpeakerSelectionEvent:
    """Who the team chose to speak next, and how (the model's answer, a
    function, a fallback); ``usage``: what asking the model cost."""

    source: str
    speaker: str
    reason: str
    usage: Usage = field(default_factory=Usage)


@dataclass
class TeamResult:
    """A team's run: every message (the task first), why it stopped, the
    agents' turns and the model usage of the run (agents and selector)."""

    messages: list[TextMessage] = field(default_factory=list)
    stop_reason: str = ""
    turns: int = 0
    usage: Usage = field(default_factory=Usage)

    @property
    def last(self) -> TextMessage:
        """The last message of the run."""
        return self.messages[-1]


TeamItem = TextMessage | Event | SpeakerSelectionEvent | TeamResult
OnMessage = Callable[[TextMessage], None]


class GroupChat(TaskRunner[TeamItem, TeamResult]):
    """What every team shares; a subclass picks the next speaker.

    - ``participants``: the agents (``AssistantAgent``, ``CodeExecutorAgent``
      or any ``Agent``), each with a name of its own.
    - ``termination``: a condition (``TextMentionTermination``,
      ``MaxMessageTermination``, ``FunctionalTermination``, combined with
      ``|`` and ``&``) or a function of the messages.
    - ``max_turns``: the most agent turns in one run (None: until the
      condition stops it; with no condition either, at most
      ``UNATTENDED_MAX_TURNS``).
    - ``on_message``: called with each message as it is added (to print it).
    """

    final_type = TeamResult

    def __init__(
        self,
        participants: Sequence[Agent],
        *,
        termination: TerminationCondition | Callable[[Sequence[TextMessage]], object] | None = None,
        max_turns: int | None = None,
        on_message: OnMessage | None = None,
    ) -> None:
        self.participants = _check_participants(type(self).__name__, participants)
        self.termination = termination_condition(termination)
        if max_turns is not None and (
            not isinstance(max_turns, int) or isinstance(max_turns, bool) or max_turns < 1
        ):
            raise ConfigurationError(f"max_turns must be a whole number >= 1 or None, got {max_turns!r}")
        if on_message is not None and not callable(on_message):
            raise ConfigurationError(f"on_message must be a function of the message, not {on_message!r}")
        self.max_turns = max_turns
        self.on_message = on_message
        self._unseen: dict[str, list[TextMessage]] = {agent.name: [] for agent in self.participants}
        self._previous: str | None = None

    def __repr__(self) -> str:
        names = [agent.name for agent in self.participants]
        return f"{type(self).__name__}({names}, termination={self.termination!r})"

    @property
    def names(self) -> list[str]:
        return [agent.name for agent in self.participants]

    def agent(self, name: str) -> Agent:
        for agent in self.participants:
            if agent.name == name:
                return agent
        raise ConfigurationError(f"this team has no agent named {name!r}: it has {', '.join(self.names)}")

    def reset(self) -> None:
        """Start over: the team forgets the chat, and each agent its context."""
        for agent in self.participants:
            self._unseen[agent.name] = []
            reset = getattr(agent, "reset", None)
            if callable(reset):
                reset()
        self._previous = None

    # -- the speaker policy ---------------------------------------------------------

    @abstractmethod
    def _select(self, history: Sequence[TextMessage]) -> tuple[Agent, SpeakerSelectionEvent | None]:
        """The next speaker, and how it was chosen (None: nothing to tell)."""

    # -- the loop -----------------------------------------------------------------------

    def _steps(self, task: list[TextMessage], bridge: Bridge) -> Iterator[TeamItem]:
        termination = self.termination
        max_turns = self.max_turns
        if max_turns is None and termination is None:
            max_turns = UNATTENDED_MAX_TURNS
        if termination is not None:
            termination.reset()
        result = TeamResult()
        for message in task:
            yield self._post(result, message)
        reason = termination.check(result.messages, ()) if termination is not None else None
        while not reason:
            if max_turns is not None and result.turns >= max_turns:
                reason = f"max_turns={max_turns} reached"
                break
            bridge.check()
            speaker, chosen = self._select(result.messages)
            if chosen is not None:
                result.usage = result.usage + chosen.usage
                yield chosen
            given, self._unseen[speaker.name] = self._unseen[speaker.name], []
            response = yield from _turn(speaker, given, bridge)
            result.turns += 1
            result.usage = result.usage + response.usage
            self._previous = speaker.name
            yield self._post(result, response.message)
            if termination is not None:
                reason = termination.check(result.messages, (response.message,))
        result.stop_reason = reason
        yield result

    def _post(self, result: TeamResult, message: TextMessage) -> TextMessage:
        result.messages.append(message)
        for agent in self.participants:
            if agent.name != message.source:
                self._unseen[agent.name].append(message)
        if self.on_message is not None:
            self.on_message(message)
        return message

    def _after(self, name: str | None, candidates: Sequence[Agent]) -> Agent:
        """The first of ``candidates`` after ``name`` in the participants' order."""
        order = self.names
        start = order.index(name) + 1 if name in order else 0
        for step in range(len(order)):
            agent = self.participants[(start + step) % len(order)]
            if agent in candidates:
                return agent
        return candidates[0]


class RoundRobinGroupChat(GroupChat):
    """The agents speak in the order given, over and over (a later run goes
    on from where the last stopped; ``reset()`` starts from the first)."""

    def _select(self, history: Sequence[TextMessage]) -> tuple[Agent, SpeakerSelectionEvent | None]:
        return self._after(self._previous, self.participants), None


def initiate_chat(
    sender: Agent,
    recipient: Agent,
    message: str,
    *,
    termination: TerminationCondition | Callable[[Sequence[TextMessage]], object] | None = None,
    max_turns: int | None = None,
    on_message: OnMessage | None = None,
) -> TeamResult:
    """AG2's ``sender.initiate_chat(recipient, message=...)``: ``sender``
    (such as a model-less ``CodeExecutorAgent``) posts ``message``,
    ``recipient`` answers first, then they take turns. It stops when
    ``recipient`` says TERMINATE, unless ``termination`` says otherwise."""
    if not isinstance(message, str) or not message:
        raise ConfigurationError("initiate_chat needs the task: message='...'")
    team = RoundRobinGroupChat([recipient, sender], max_turns=max_turns, on_message=on_message)
    team.termination = termination_condition(termination) or TextMentionTermination(
        "TERMINATE", sources=[recipient.name]
    )
    return team.run(TextMessage(sender.name, message))


def _turn(speaker: Agent, given: list[TextMessage], bridge: Bridge) -> Generator[TeamItem, None, Response]:
    response = None
    streamed: set[int] = set()
    for item in speaker._steps(given, bridge):
        if isinstance(item, Response):
            response = item
        else:
            streamed.add(id(item))
            yield item
    if response is None:
        raise ConfigurationError(f"the agent {speaker.name!r} ended its turn without a Response")
    # an agent may put an event in its response only (a model-less executor's run): the team shows it
    yield from (event for event in response.inner if id(event) not in streamed)
    if response.message.source != speaker.name:
        response = Response(
            TextMessage(speaker.name, response.message.content), response.inner, response.usage
        )
    return response


def _check_participants(team: str, participants: Sequence[Agent]) -> list[Agent]:
    if isinstance(participants, Agent) or not isinstance(participants, Sequence):
        raise ConfigurationError(f"{team} takes a list of agents, such as {team}([coder, executor])")
    agents = list(participants)
    if not agents:
        raise ConfigurationError(f"{team} needs at least one agent: {team}([coder, executor])")
    seen: set[str] = set()
    for agent in agents:
        if not isinstance(agent, Agent):
            raise ConfigurationError(
                f"{team} takes execbox agents (AssistantAgent, CodeExecutorAgent, an Agent subclass), "
                f"not {agent!r}"
            )
        name = getattr(agent, "name", None)
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"every agent of a team needs a name; {agent!r} has {name!r}")
        if name in seen:
            raise ConfigurationError(
                f"two agents of the team are named {name!r}: give each its own name "
                "(the messages and the selector tell them apart by name)"
            )
        seen.add(name)
    return agents
