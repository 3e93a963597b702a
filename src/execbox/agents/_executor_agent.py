"""An agent that runs the code in messages, or, with a model, writes code
for a task, runs it, retries on error and reflects on the result.

Without a model it is a terminal for other agents: the code blocks of the
incoming messages (from ``sources`` only, if given) run, and the output is the
reply. With a model, one call goes::

    generate → CodeGenerationEvent → execute → CodeExecutionEvent
      └ on failure, while retries are left: ask {retry, reason} → RetryDecisionEvent → generate again
    → reflect → Response

``stream(task)`` yields those events and ends with the ``Response``;
``run(task)`` returns the ``Response``; ``arun``/``arun_stream`` are the
asyncio forms of the same code.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from typing import Any

from .._errors import ConfigurationError, ModelError
from .._extract import extract_code_blocks
from .._models import CodeBlock, ExecutionResult
from ..backends import executor_from_config
from ..backends._base import Executor
from ._agent import Agent
from ._approval import ApprovalRequest, check_approver, decide, refusal_text
from ._bridge import Bridge
from ._context import bound, context_policy, describe, from_description
from ._events import (
    ApprovalEvent,
    CodeExecutionEvent,
    CodeGenerationEvent,
    Event,
    Response,
    RetryDecisionEvent,
    StreamChunkEvent,
    TextMessage,
    ThoughtEvent,
)
from ._providers import ChatModel, model_from_config
from ._reply import ModelReply

__all__ = ["CodeExecutorAgent", "describe_result"]


RETRY_SCHEMA = {
    "title": "RetryDecision",
    "type": "object",
    "properties": {"retry": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["retry", "reason"],
    "additionalProperties": False,
}


def describe_result(result: ExecutionResult) -> str:
    """The result of a run as a model should read it: the output, or a
    plain statement that there was none, and the exit code on failure."""
    output = result.to_text("plain")
    if not output.strip():
        return (
            f"The code ran and printed nothing (exit code {result.exit_code}). "
            "If you expected a result, print it."
        )
    if result.exit_code != 0:
        return f"The code ran and failed with exit code {result.exit_code}. Its output:\n{output}"
    return output


class CodeExecutorAgent(Agent):
    """Runs code from messages, or writes and runs code with a model.

    - ``executor``: where the code runs (any execbox executor).
    - ``model``: a ``ModelClient``; without one the agent only runs code it
      is given.
    - ``sources``: without a model, run code only from these senders.
    - ``max_retries_on_error``: with a model, how many times a failed run
      may be followed by a new attempt (the model decides each time).
    - ``stream_model``: stream the model's answers as ``StreamChunkEvent``.
    - ``approval``: called with an ``ApprovalRequest`` (the code blocks)
      before code runs; a refusal is the run's answer and nothing runs.
    - ``model_context``: what is sent to the model (None: all; N messages;
      ``BufferedContext``; ``TokenLimitedContext``).

    Cancelling ``arun``/``arun_stream`` kills the block that is running.
    """

    DEFAULT_SYSTEM_MESSAGE = (
        "You solve tasks by writing code that execbox runs for you. Write each program in one fenced "
        "code block that names its language (```python or ```bash). Print every result you need to see. "
        "When the code has run you receive its output; fix errors by writing the whole corrected block."
    )
    NO_CODE_MESSAGE = (
        "No code blocks were found in the messages. Send at least one fenced code block that names its "
        "language, such as ```python or ```bash."
    )

    def __init__(
        self,
        name: str,
        executor: Executor,
        *,
        model: ChatModel | None = None,
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        description: str | None = None,
        sources: Sequence[str] | None = None,
        max_retries_on_error: int = 0,
        stream_model: bool = False,
        approval: Any = None,
        model_context: Any = None,
    ) -> None:
        if not isinstance(executor, Executor):
            raise ConfigurationError(f"CodeExecutorAgent needs an execbox executor, not {executor!r}")
        if not isinstance(max_retries_on_error, int) or max_retries_on_error < 0:
            raise ConfigurationError("max_retries_on_error must be a whole number >= 0")
        if max_retries_on_error and model is None:
            raise ConfigurationError(
                "max_retries_on_error needs a model (model=ModelClient(...)) to decide retries"
            )
        check_approver(approval)
        self.name = name
        self.executor = executor
        self.model = model
        self.system_message = system_message
        self.description = description or (
            "Runs the Python and shell code blocks it is sent and answers with their output."
            if model is None
            else "Writes Python and shell code for a task, runs it, fixes errors and explains the result."
        )
        self.sources = list(sources) if sources is not None else None
        self.max_retries_on_error = max_retries_on_error
        self.stream_model = stream_model
        self.approval = approval
        self.model_context = context_policy(model_context)
        self._context: list[dict[str, str]] = []

    def __repr__(self) -> str:
        return f"CodeExecutorAgent(name={self.name!r}, executor={self.executor!r}, model={self.model!r})"

    # -- the steps of one call ----------------------------------------------------

    def _steps(self, messages: list[TextMessage], bridge: Bridge) -> Iterator[Event | Response]:
        if self.model is None:
            yield from self._run_given_code(messages, bridge)
            return
        yield from self._generate_and_run(messages, self.model, bridge)

    def reset(self) -> None:
        """Forget the conversation so far (the executor keeps its state)."""
        self._context.clear()

    def code_blocks(self, messages: Sequence[TextMessage]) -> list[CodeBlock]:
        """The code blocks of the messages this agent takes code from."""
        blocks: list[CodeBlock] = []
        for message in messages:
            if self.sources is None or message.source in self.sources:
                blocks.extend(extract_code_blocks(message.content))
        return blocks

    def execute(
        self, blocks: Sequence[CodeBlock], *, bridge: Bridge | None = None
    ) -> tuple[ExecutionResult, str]:
        """Run the blocks: the result, and the text a model reads."""
        result = (bridge or Bridge()).run_blocks(self.executor, blocks)
        return result, describe_result(result)

    def approve(self, blocks: Sequence[CodeBlock], bridge: Bridge | None = None) -> ApprovalEvent | None:
        """Ask ``approval`` about the blocks: None when there is no approver."""
        if self.approval is None:
            return None
        request = ApprovalRequest("code", self.name, code_blocks=tuple(blocks))
        decision = decide(self.approval, request, (bridge or Bridge()).wait)
        return ApprovalEvent(self.name, request, decision.approved, decision.reason)

    # -- the two behaviours -------------------------------------------------------

    def _run_given_code(self, messages: list[TextMessage], bridge: Bridge) -> Iterator[Event | Response]:
        blocks = self.code_blocks(messages)
        if not blocks:
            yield Response(TextMessage(self.name, self.NO_CODE_MESSAGE))
            return
        approval = self.approve(blocks, bridge)
        if approval is not None:
            yield approval
            if not approval.approved:
                yield Response(TextMessage(self.name, refusal_text(approval)), (approval,))
                return
        result, text = self.execute(blocks, bridge=bridge)
        event = CodeExecutionEvent(self.name, 0, result, text)
        yield Response(TextMessage(self.name, text), tuple(e for e in (approval, event) if e is not None))

    def _generate_and_run(
        self, messages: list[TextMessage], model: ChatModel, bridge: Bridge
    ) -> Iterator[Event | Response]:
        before = model.usage
        inner: list[Event] = []
        for message in messages:
            self._context.append({"role": "user", "content": message.content})
        for attempt in range(self.max_retries_on_error + 1):
            reply = yield from self._infer(model, inner, bridge)
            blocks = extract_code_blocks(reply.content)
            if not blocks:
                yield Response(TextMessage(self.name, reply.content), tuple(inner), model.usage - before)
                return
            inner.append(CodeGenerationEvent(self.name, attempt, reply.content, tuple(blocks)))
            yield inner[-1]
            approval = self.approve(blocks, bridge)
            if approval is not None:
                inner.append(approval)
                yield approval
                if not approval.approved:
                    self._context.append({"role": "user", "content": refusal_text(approval)})
                    break
            result, text = self.execute(blocks, bridge=bridge)
            self._context.append({"role": "user", "content": text})
            inner.append(CodeExecutionEvent(self.name, attempt, result, text))
            yield inner[-1]
            if result.exit_code == 0 or attempt == self.max_retries_on_error:
                break
            decision = self._decide_retry(model, text)
            inner.append(RetryDecisionEvent(self.name, attempt, decision["retry"], decision["reason"]))
            yield inner[-1]
            if not decision["retry"]:
                break
            self._context.append(
                {
                    "role": "user",
                    "content": (f"Try again (attempt {attempt + 2}). What to fix: {decision['reason']}"),
                }
            )
        reflection = yield from self._infer(model, inner, bridge)
        yield Response(TextMessage(self.name, reflection.content), tuple(inner), model.usage - before)

    def _infer(
        self, model: ChatModel, inner: list[Event], bridge: Bridge
    ) -> Generator[Event, None, ModelReply]:
        """One model call on the context: yields its stream chunks and
        thought, adds its answer to the context, returns it."""
        bridge.check()
        reply = None
        for item in self._ask(model):
            if isinstance(item, ModelReply):
                reply = item
            else:
                yield item
        assert reply is not None
        bridge.check()
        if reply.thought:
            inner.append(ThoughtEvent(self.name, reply.thought))
            yield inner[-1]
        self._context.append({"role": "assistant", "content": reply.content})
        return reply

    def _ask(self, model: ChatModel) -> Iterator[StreamChunkEvent | ModelReply]:
        prompt = self._prompt()
        if not self.stream_model:
            yield model.create(prompt)
            return
        for piece in model.stream(prompt):
            yield StreamChunkEvent(self.name, piece) if isinstance(piece, str) else piece

    def _prompt(self) -> list[dict[str, str]]:
        """The system message, then the conversation so far (as much as
        ``model_context`` keeps)."""
        self._context[:] = bound(self._context, self.model_context)
        system = [{"role": "system", "content": self.system_message}] if self.system_message else []
        return system + self._context

    def _decide_retry(self, model: ChatModel, output: str) -> dict[str, Any]:
        question = (
            f"The last run failed:\n{output}\n\nShould we try to fix it? Answer with 'retry' (true or false) "
            "and 'reason': what went wrong, why you decide so, and what you would change."
        )
        prompt = [*self._prompt(), {"role": "user", "content": question}]
        try:
            decision = model.create_json(prompt, RETRY_SCHEMA)
        except ModelError as exc:
            return {"retry": False, "reason": f"no decision could be read from the model: {exc}"}
        return {"retry": bool(decision.get("retry")), "reason": str(decision.get("reason", ""))}

    # -- declarative config -------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """The agent, its executor and its model as JSON-ready data."""
        return {
            "type": "CodeExecutorAgent",
            "version": 1,
            "name": self.name,
            "executor": self.executor.to_config(),
            "model": self.model.to_config() if self.model else None,
            "system_message": self.system_message,
            "description": self.description,
            "sources": self.sources,
            "max_retries_on_error": self.max_retries_on_error,
            "stream_model": self.stream_model,
            "model_context": describe(self.model_context),
        }

    @classmethod
    def from_config(
        cls, config: dict[str, Any], *, api_key: str | None = None, approval: Any = None
    ) -> CodeExecutorAgent:
        if config.get("type") != "CodeExecutorAgent":
            raise ConfigurationError(
                "not a CodeExecutorAgent config (its 'type' must be 'CodeExecutorAgent')"
            )
        model = model_from_config(config["model"], api_key=api_key) if config.get("model") else None
        return cls(
            config["name"],
            executor_from_config(config["executor"]),
            model=model,
            system_message=config.get("system_message"),
            description=config.get("description"),
            sources=config.get("sources"),
            max_retries_on_error=config.get("max_retries_on_error", 0),
            stream_model=config.get("stream_model", False),
            approval=approval,
            model_context=from_description(config.get("model_context")),
        )
