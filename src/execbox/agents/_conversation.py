"""The two-agent pattern: a writer (a model) proposes code, an executor agent
runs it and answers with the output, until the writer says TERMINATE or the
turns run out; a person can be asked before each reply.

``human_input_mode``:
- ``"ALWAYS"``: before the executor answers, ask: Enter lets it run the
  code (or, after TERMINATE, ends the chat); text is sent to the writer
  instead, as guidance; ``exit`` ends the chat.
- ``"TERMINATE"``: ask only when the writer says TERMINATE (Enter ends,
  text goes on).
- ``"NEVER"``: run everything, stop at TERMINATE or ``max_turns``.

``approval``: called with an ``ApprovalRequest`` holding the code blocks
before they run; a refusal (and its reason) is what the writer hears back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .._errors import ConfigurationError
from .._models import ExecutionResult
from ..backends._base import Executor
from ._approval import Approval, ApprovalRequest, check_approver, decide, refusal_text
from ._bridge import Bridge
from ._events import TextMessage
from ._executor_agent import CodeExecutorAgent
from ._providers import ChatModel
from ._usage import Usage

__all__ = ["ChatResult", "Conversation", "WriterAgent", "format_chat_result", "writer_system_message"]

HumanInputMode = Literal["ALWAYS", "TERMINATE", "NEVER"]
TERMINATE = "TERMINATE"
# With nobody watching and no max_turns, a model that never says TERMINATE stops here.
UNATTENDED_MAX_TURNS = 30
_TERMINATE_WORD = re.compile(r"\bTERMINATE\b")


def writer_system_message(languages: Sequence[str] = ("python", "bash"), *, stateful: bool = False) -> str:
    """The writer's default instructions, for the languages the executor
    runs and whether it keeps state between blocks (a Jupyter kernel)."""
    fences = " or ".join(f"```{name}" for name in languages[:4])
    state = (
        "- The executor keeps one Python session: variables, functions and imports stay defined between "
        "blocks and turns, so later blocks may use them.\n"
        if stateful
        else "- Each block runs in a fresh process: variables do not carry over between blocks, so repeat "
        "what a block needs (files do carry over).\n"
    )
    return (
        "You are a programmer working with an executor that runs your code and sends back what it printed. "
        "Solve the task step by step in code.\n"
        f"- Put each program in one fenced block that names its language ({fences}). The executor runs "
        "every block of your message, in order, and stops at the first failure.\n"
        "- To save a block as a file, make its first line a comment `# filename: path/name.py`; files stay "
        "in the working directory between turns.\n"
        + state
        + "- The executor cannot type input and does not show return values: print every result you need.\n"
        "- Write complete programs; when one fails, read the error and send the whole corrected block.\n"
        "- Install nothing unless asked; prefer the standard library.\n"
        f"- When the task is done and checked, give the answer in one or two sentences and end your "
        f"message with the word {TERMINATE}."
    )


class WriterAgent:
    """The model's side of the chat: reads the history, writes the next message."""

    def __init__(
        self,
        model: ChatModel,
        *,
        name: str = "writer",
        system_message: str | None = None,
        languages: Sequence[str] = ("python", "bash"),
        stateful: bool = False,
    ) -> None:
        self.model = model
        self.name = name
        self.system_message = (
            system_message
            if system_message is not None
            else writer_system_message(languages, stateful=stateful)
        )

    def reply(self, history: Sequence[TextMessage]) -> TextMessage:
        prompt = [{"role": "system", "content": self.system_message}] + [
            {"role": "assistant" if m.source == self.name else "user", "content": m.content} for m in history
        ]
        return TextMessage(self.name, self.model.create(prompt).content)


@dataclass
class ChatResult:
    """What a chat produced: every message, a summary, the model cost, what
    the person typed, how many writer turns ran and why it stopped."""

    chat_history: list[TextMessage] = field(default_factory=list)
    summary: str = ""
    cost: Usage = field(default_factory=Usage)
    human_input: list[str] = field(default_factory=list)
    turns: int = 0
    stop_reason: str = ""
    executions: list[ExecutionResult] = field(default_factory=list)
    refusals: list[Approval] = field(default_factory=list)


class Conversation:
    """A writer and an executor agent talking until the task is done.

    - ``executor``: an execbox executor or a model-less ``CodeExecutorAgent``.
    - ``human_input_mode`` and ``human_input`` (a callable taking the prompt
      and returning what the person typed; default ``input``).
    - ``on_message``: called with each message as it is added (to print it).
    - ``is_termination_msg``: decides whether a writer message ends the
      task (default: it contains the word TERMINATE).
    """

    def __init__(
        self,
        writer: WriterAgent,
        executor: Executor | CodeExecutorAgent,
        *,
        human_input_mode: HumanInputMode = "NEVER",
        human_input: Callable[[str], str] | None = None,
        on_message: Callable[[TextMessage], None] | None = None,
        is_termination_msg: Callable[[TextMessage], bool] | None = None,
        user_name: str = "user",
        approval: Callable[..., object] | None = None,
    ) -> None:
        if human_input_mode not in ("ALWAYS", "TERMINATE", "NEVER"):
            raise ConfigurationError(
                f"human_input_mode={human_input_mode!r}: use 'ALWAYS', 'TERMINATE' or 'NEVER'"
            )
        check_approver(approval)
        if isinstance(executor, Executor):
            executor = CodeExecutorAgent("executor", executor)
        if executor.model is not None:
            raise ConfigurationError("the executor side of a Conversation runs code only: give it no model")
        self.writer = writer
        self.executor = executor
        self.human_input_mode = human_input_mode
        self.human_input = human_input or input
        self.on_message = on_message
        self.is_termination_msg = is_termination_msg or (lambda m: bool(_TERMINATE_WORD.search(m.content)))
        self.user_name = user_name
        self.approval = approval

    def initiate_chat(
        self,
        message: str,
        *,
        max_turns: int | None = None,
        summary_method: Literal["last_msg", "reflection"] = "last_msg",
    ) -> ChatResult:
        """Send the task to the writer and go on until done.

        ``max_turns``: the most writer messages (None: until TERMINATE or
        the person stops; unattended, at most ``UNATTENDED_MAX_TURNS``).
        ``summary_method``: the writer's last words, or a summary the model
        writes from the chat (``reflection``)."""
        if max_turns is not None and (not isinstance(max_turns, int) or max_turns < 1):
            raise ConfigurationError(f"max_turns must be a whole number >= 1 or None, got {max_turns!r}")
        if max_turns is None and self.human_input_mode == "NEVER":
            max_turns = UNATTENDED_MAX_TURNS
        before = self.writer.model.usage
        result = ChatResult()
        self._add(result, TextMessage(self.user_name, message))
        while True:
            if max_turns is not None and result.turns >= max_turns:
                result.stop_reason = f"max_turns={max_turns} reached"
                break
            written = self.writer.reply(result.chat_history)
            result.turns += 1
            self._add(result, written)
            done = self.is_termination_msg(written)
            typed = self._ask_human(written, done, result)
            if typed is not None and typed.strip().lower() == "exit":
                # after TERMINATE, exit (or end of input) ends the chat as Enter does: the task is done
                result.stop_reason = (
                    f"the writer said {TERMINATE}; the person typed exit" if done else "the person typed exit"
                )
                break
            if typed:
                self._add(result, TextMessage(self.user_name, typed))
                continue
            if done:
                result.stop_reason = f"the writer said {TERMINATE}"
                break
            self._add(result, self._execute(written, result))
        result.summary = self._summary(result, summary_method)
        result.cost = self.writer.model.usage - before
        return result

    def _ask_human(self, written: TextMessage, done: bool, result: ChatResult) -> str | None:
        if self.human_input_mode == "NEVER" or (self.human_input_mode == "TERMINATE" and not done):
            return None
        if done:
            prompt = "The writer says the task is done. Enter ends the chat; text sends it to the writer: "
        elif self.executor.code_blocks([written]):
            prompt = "Enter runs the code; text goes to the writer instead; exit stops: "
        else:
            prompt = "Enter lets the executor answer; text goes to the writer instead; exit stops: "
        try:
            typed = self.human_input(prompt)
        except EOFError:
            typed = "exit"
        result.human_input.append(typed)
        return typed

    def _execute(self, written: TextMessage, result: ChatResult) -> TextMessage:
        blocks = self.executor.code_blocks([written])
        if not blocks:
            return TextMessage(
                self.executor.name,
                (
                    f"There is no code block in your message. Write code in a fenced block that names its "
                    f"language, or, if the task is done, say {TERMINATE}."
                ),
            )
        approval = self.approval or self.executor.approval
        if approval is not None:
            request = ApprovalRequest("code", self.executor.name, code_blocks=tuple(blocks))
            decision = decide(approval, request, Bridge().wait)
            if not decision.approved:
                result.refusals.append(decision)
                return TextMessage(self.executor.name, refusal_text(decision))
        execution, text = self.executor.execute(blocks)
        result.executions.append(execution)
        state = "succeeded" if execution.exit_code == 0 else "failed"
        return TextMessage(self.executor.name, f"exitcode: {execution.exit_code} (execution {state})\n{text}")

    def _add(self, result: ChatResult, message: TextMessage) -> None:
        result.chat_history.append(message)
        if self.on_message is not None:
            self.on_message(message)

    def _summary(self, result: ChatResult, method: str) -> str:
        if method == "reflection":
            prompt = [
                {"role": "system", "content": "Summarise what was done and found in this chat, briefly."}
            ]
            prompt += [{"role": "user", "content": f"{m.source}: {m.content}"} for m in result.chat_history]
            return self.writer.model.create(prompt).content.strip()
        if method != "last_msg":
            raise ConfigurationError(f"summary_method={method!r}: use 'last_msg' or 'reflection'")
        for message in reversed(result.chat_history):
            if message.source == self.writer.name:
                text = _TERMINATE_WORD.sub("", message.content).strip()
                if text:
                    return text
        return ""


def format_message(message: TextMessage) -> str:
    """A chat message for a terminal: a rule with the sender, then the text."""
    return (
        f"\n── {message.source} "
        + "─" * max(0, 60 - len(message.source))
        + "\n"
        + message.content.rstrip("\n")
    )


def format_chat_result(result: ChatResult) -> str:
    """A short report of a chat for a terminal or a log."""
    lines = [
        f"Stopped: {result.stop_reason} after {result.turns} writer turn(s), "
        f"{len(result.chat_history)} messages, {len(result.executions)} run(s)."
    ]
    if result.human_input:
        typed = [t if t else "(Enter)" for t in result.human_input]
        lines.append("Human input: " + " | ".join(typed))
    lines.append(f"Model usage: {result.cost.describe()}")
    if result.summary:
        lines.append("Summary: " + result.summary)
    return "\n".join(lines)
