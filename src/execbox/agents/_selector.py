"""``SelectorGroupChat``: a team whose next speaker is picked each turn by a
function of the messages, or by a model that reads the agents' names and
descriptions and the chat so far.

    team = SelectorGroupChat([planner, coder, executor], ModelClient("gpt-4o-mini"),
                             termination=TextMentionTermination("TERMINATE"))

The model answers with a name. An answer that names no candidate (or
several) is sent back once with the names to choose from; a second such
answer falls back to round robin (the next candidate after the last
speaker). Each choice is a ``SpeakerSelectionEvent`` that says how it was
made. ``selector_func(messages)`` returns a name, or None to leave the choice
to the model (to round robin when there is no model); a name that is no
agent of the team is an error.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import ConfigurationError
from ._agent import Agent
from ._events import TextMessage
from ._providers import ChatModel
from ._team import GroupChat, OnMessage, SpeakerSelectionEvent
from ._termination import TerminationCondition
from ._usage import Usage

__all__ = ["SelectorGroupChat"]

SelectorFunc = Callable[[Sequence[TextMessage]], str | None]
SELECTOR = "selector"


class SelectorGroupChat(GroupChat):
    """A team where a model (``model``) or a function (``selector_func``)
    picks who speaks next; with both, the function goes first.

    - ``selector_prompt``: the model's instructions, a format string with
      ``{roles}`` (each agent's name and description), ``{participants}``
      (the names to choose from) and ``{history}`` (the chat so far).
    - ``allow_repeated_speaker``: whether the last speaker may speak again
      (by default the others are the candidates; with one left, it speaks
      without asking the model).
    - ``termination``, ``max_turns``, ``on_message``: as ``RoundRobinGroupChat``.
    """

    DEFAULT_SELECTOR_PROMPT = (
        "You pick who speaks next in a team chat.\n\n"
        "The team, each with what it does:\n{roles}\n\n"
        "The chat so far:\n{history}\n\n"
        "Who of {participants} should speak next to move the task forward? "
        "Answer with one name from that list and nothing else."
    )

    def __init__(
        self,
        participants: Sequence[Agent],
        model: ChatModel | None = None,
        *,
        selector_func: SelectorFunc | None = None,
        selector_prompt: str | None = None,
        allow_repeated_speaker: bool = False,
        termination: TerminationCondition | Callable[[Sequence[TextMessage]], object] | None = None,
        max_turns: int | None = None,
        on_message: OnMessage | None = None,
    ) -> None:
        super().__init__(participants, termination=termination, max_turns=max_turns, on_message=on_message)
        if model is None and selector_func is None:
            raise ConfigurationError(
                "SelectorGroupChat needs a model to pick the speakers (SelectorGroupChat(agents, "
                "ModelClient(...))) or selector_func=f, a function of the messages that returns a name"
            )
        if model is not None and not callable(getattr(model, "create", None)):
            raise ConfigurationError(
                "SelectorGroupChat's model must be a model client (ModelClient, AnthropicClient), "
                f"not {model!r}"
            )
        if selector_func is not None and not callable(selector_func):
            raise ConfigurationError(
                f"selector_func must be a function of the messages that returns a name, not {selector_func!r}"
            )
        self.model = model
        self.selector_func = selector_func
        self.selector_prompt = selector_prompt or self.DEFAULT_SELECTOR_PROMPT
        try:
            self.selector_prompt.format(roles="", participants="", history="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigurationError(
                f"selector_prompt does not format ({type(exc).__name__}: {exc}): it may use {{roles}}, "
                "{participants} and {history} only; write other braces twice ({{ }})"
            ) from None
        self.allow_repeated_speaker = allow_repeated_speaker

    def _select(self, history: Sequence[TextMessage]) -> tuple[Agent, SpeakerSelectionEvent | None]:
        if self.selector_func is not None:
            name = self.selector_func(list(history))
            if name is not None:
                if name not in self.names:
                    raise ConfigurationError(
                        f"selector_func returned {name!r}, which is no agent of this team: return one of "
                        f"{', '.join(self.names)}, or None to let the model choose"
                    )
                return self.agent(name), SpeakerSelectionEvent(SELECTOR, name, "selector_func chose it")
        candidates = self._candidates()
        if len(candidates) == 1:
            only = candidates[0]
            why = (
                "the only agent"
                if len(self.participants) == 1
                else "the only candidate besides the last speaker"
            )
            return only, SpeakerSelectionEvent(SELECTOR, only.name, why)
        if self.model is None:
            fallback = self._after(self._previous, candidates)
            why = "selector_func returned None and there is no model: round robin"
            return fallback, SpeakerSelectionEvent(SELECTOR, fallback.name, why)
        return self._ask_model(self.model, history, candidates)

    def _candidates(self) -> list[Agent]:
        if self.allow_repeated_speaker or self._previous is None:
            return list(self.participants)
        others = [agent for agent in self.participants if agent.name != self._previous]
        return others or list(self.participants)

    def _ask_model(
        self, model: ChatModel, history: Sequence[TextMessage], candidates: list[Agent]
    ) -> tuple[Agent, SpeakerSelectionEvent]:
        names = [agent.name for agent in candidates]
        roles = "\n".join(
            f"- {agent.name}: {getattr(agent, 'description', '') or 'an agent'}"
            for agent in self.participants
        )
        transcript = "\n\n".join(f"{m.source}: {m.content}" for m in history) or "(nothing yet)"
        prompt: list[dict[str, Any]] = [
            {
                "role": "user",
                "content": self.selector_prompt.format(
                    roles=roles, participants=", ".join(names), history=transcript
                ),
            }
        ]
        usage = Usage()
        answers: list[str] = []
        for _attempt in range(2):
            reply = model.create(prompt)
            usage = usage + reply.usage
            answers.append(reply.content)
            chosen = named_agent(reply.content, names)
            if chosen is not None:
                why = "the model chose it" + (" when asked again" if len(answers) > 1 else "")
                return self.agent(chosen), SpeakerSelectionEvent(SELECTOR, chosen, why, usage)
            prompt += [
                {"role": "assistant", "content": reply.content},
                {
                    "role": "user",
                    "content": (
                        f"That answer names none of the candidates. Answer with exactly one of these names "
                        f"and nothing else: {', '.join(names)}."
                    ),
                },
            ]
        fallback = self._after(self._previous, candidates)
        why = (
            f"the model named no candidate twice ({' / '.join(repr(a[:80]) for a in answers)}): "
            "round robin chose the next one"
        )
        return fallback, SpeakerSelectionEvent(SELECTOR, fallback.name, why, usage)


def named_agent(answer: str, names: Sequence[str]) -> str | None:
    """The one name of ``names`` the answer gives: the whole answer (quotes
    and a final full stop aside), else the only name it mentions as a word."""
    text = answer.strip().strip("\"'`*").rstrip(".").strip()
    if text in names:
        return text
    mentioned = [name for name in names if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", answer)]
    return mentioned[0] if len(mentioned) == 1 else None
