"""``AssistantAgent``: a model with tools, through function calling.

    agent = AssistantAgent("assistant", ModelClient("gpt-4o-mini"),
                           tools=[PythonTool(), ShellTool(), my_function])
    print(agent.run("What is the 20th Fibonacci number?").content)

One call goes::

    model (with the tools' schemas) ─ text ─→ Response
      └ tool_calls → ToolCallEvent → [approval] → run each (parallel calls at once)
        → ToolResultEvent per call, sent back with its tool_call_id → model again ...

until the model answers in text or ``max_tool_iterations`` rounds of calls
have run. Then, with ``reflect_on_tool_use``, the model is asked once more
for a text answer (no tools); otherwise the response is the last results
and says the limit was reached. ``stream``/``run`` and ``arun_stream``/
``arun``: cancelling the async forms kills the code a tool is running.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Self

from .._errors import ConfigurationError
from ..tools._function_tool import tool_text
from ._agent import Agent
from ._approval import ApprovalRequest, check_approver, decide, refusal_text
from ._bridge import Bridge
from ._context import bound, context_policy, describe, from_description
from ._events import (
    ApprovalEvent,
    Event,
    Response,
    StreamChunkEvent,
    TextMessage,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ._providers import ChatModel, model_from_config
from ._reply import ModelReply, ToolCall, assistant_message
from ._toolbox import Toolbox

__all__ = ["AssistantAgent"]


class AssistantAgent(Agent):
    """A model that calls tools until it can answer.

    - ``model``: a ``ModelClient`` or ``AnthropicClient``.
    - ``tools``: ``PythonTool``, ``ShellTool``, ``FunctionTool``,
      ``file_tools(workspace)``, or plain functions.
    - ``max_tool_iterations``: rounds of tool calls before the agent stops.
    - ``reflect_on_tool_use``: at the limit, ask the model for a text answer.
    - ``approval``: called with an ``ApprovalRequest`` before each tool
      call; a refusal is sent to the model as the call's result.
    - ``model_context``: what is sent (None: all; N messages;
      ``BufferedContext``; ``TokenLimitedContext``).
    - ``stream_model``: stream the model's text as ``StreamChunkEvent``.
    - ``parallel_tool_calls``: run the calls of one answer at once.
    """

    DEFAULT_SYSTEM_MESSAGE = (
        "You are a helpful assistant. Use the tools to compute, run code and inspect files instead of "
        "guessing; read each result before going on. When you have the answer, reply in text."
    )

    def __init__(
        self,
        name: str,
        model: ChatModel,
        *,
        tools: Sequence[Any] = (),
        system_message: str | None = DEFAULT_SYSTEM_MESSAGE,
        description: str | None = None,
        max_tool_iterations: int = 10,
        reflect_on_tool_use: bool = False,
        approval: Any = None,
        model_context: Any = None,
        stream_model: bool = False,
        parallel_tool_calls: bool = True,
        _toolbox: Toolbox | None = None,
    ) -> None:
        if not callable(getattr(model, "create", None)):
            raise ConfigurationError(
                f"AssistantAgent needs a model client (ModelClient, AnthropicClient), not {model!r}"
            )
        if not isinstance(max_tool_iterations, int) or max_tool_iterations < 1:
            raise ConfigurationError("max_tool_iterations must be a whole number >= 1")
        check_approver(approval)
        self.name = name
        self.model = model
        self.toolbox = _toolbox or Toolbox(tools)
        self.system_message = system_message
        self.description = (
            description
            or "Answers with the help of tools: " + (", ".join(self.toolbox.tools) or "none") + "."
        )
        self.max_tool_iterations = max_tool_iterations
        self.reflect_on_tool_use = reflect_on_tool_use
        self.approval = approval
        self.model_context = context_policy(model_context)
        self.stream_model = stream_model
        self.parallel_tool_calls = parallel_tool_calls
        self._context: list[dict[str, Any]] = []

    def __repr__(self) -> str:
        return f"AssistantAgent(name={self.name!r}, model={self.model!r}, tools={list(self.toolbox.tools)})"

    @property
    def tools(self) -> list[Any]:
        return list(self.toolbox.tools.values())

    # -- entry points -----------------------------------------------------------

    def reset(self) -> None:
        """Forget the conversation so far."""
        self._context.clear()

    def close(self) -> None:
        """Close the tools this agent built from a saved config."""
        self.toolbox.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop -------------------------------------------------------------------

    def _steps(self, messages: list[TextMessage], bridge: Bridge) -> Iterator[Event | Response]:
        before = self.model.usage
        inner: list[Event] = []
        self._context.extend({"role": "user", "content": m.content} for m in messages)
        schemas = self.toolbox.schemas()
        results: list[ToolResultEvent] = []
        for iteration in range(self.max_tool_iterations):
            reply = yield from self._infer(bridge, inner, schemas)
            if not reply.tool_calls:
                yield Response(TextMessage(self.name, reply.content), tuple(inner), self.model.usage - before)
                return
            inner.append(ToolCallEvent(self.name, iteration, reply.tool_calls))
            yield inner[-1]
            results = yield from self._run_calls(reply.tool_calls, bridge, inner)
            for result in results:
                self._context.append(
                    {"role": "tool", "tool_call_id": result.call_id, "content": result.content}
                )
                inner.append(result)
                yield result
        if self.reflect_on_tool_use:
            reply = yield from self._infer(bridge, inner, schemas, tool_choice="none")
            text = reply.content
        else:
            text = (
                f"Stopped after {self.max_tool_iterations} round(s) of tool calls (max_tool_iterations) "
                "without a final answer. The last results:\n"
                + "\n".join(f"- {r.name}: {r.content}" for r in results)
            )
        yield Response(TextMessage(self.name, text), tuple(inner), self.model.usage - before)

    def _infer(
        self,
        bridge: Bridge,
        inner: list[Event],
        schemas: list[dict[str, Any]],
        tool_choice: str | None = None,
    ) -> Generator[Event, None, ModelReply]:
        bridge.check()
        prompt = self._prompt()
        reply = None
        if self.stream_model:
            for piece in self.model.stream(prompt, tools=schemas or None, tool_choice=tool_choice):
                if isinstance(piece, ModelReply):
                    reply = piece
                else:
                    yield StreamChunkEvent(self.name, piece)
        else:
            reply = self.model.create(prompt, tools=schemas or None, tool_choice=tool_choice)
        assert reply is not None
        bridge.check()
        if reply.thought:
            inner.append(ThoughtEvent(self.name, reply.thought))
            yield inner[-1]
        self._context.append(assistant_message(reply))
        return reply

    def _run_calls(
        self, calls: Sequence[ToolCall], bridge: Bridge, inner: list[Event]
    ) -> Generator[Event, None, list[ToolResultEvent]]:
        """Approve each call (one at a time: a person may answer), then run
        the approved ones, at once when there are several."""
        answers: dict[str, ToolResultEvent] = {}
        approved: list[tuple[ToolCall, Any]] = []
        for call in calls:
            tool = self.toolbox.get(call.name)
            if tool is None:
                answers[call.id] = ToolResultEvent(
                    self.name,
                    call.id,
                    call.name,
                    (
                        f"Error: there is no tool named {call.name!r}. The tools: "
                        f"{', '.join(self.toolbox.tools) or 'none'}."
                    ),
                    True,
                )
                continue
            unreadable = _unreadable_arguments(call)
            if unreadable is not None:  # it cannot run: nobody is asked, the model is told why
                answers[call.id] = ToolResultEvent(self.name, call.id, call.name, unreadable, True)
                continue
            if self.approval is not None:
                request = ApprovalRequest(
                    "tool_call", self.name, tool_name=call.name, arguments=call.arguments
                )
                decision = decide(self.approval, request, bridge.wait)
                inner.append(ApprovalEvent(self.name, request, decision.approved, decision.reason))
                yield inner[-1]
                if not decision.approved:
                    answers[call.id] = ToolResultEvent(
                        self.name, call.id, call.name, refusal_text(decision), True
                    )
                    continue
            approved.append((call, tool))
        bridge.check()
        if len(approved) > 1 and self.parallel_tool_calls:
            with ThreadPoolExecutor(max_workers=len(approved), thread_name_prefix="execbox-tool") as pool:
                done = list(pool.map(lambda pair: self._call(bridge, *pair), approved))
        else:
            done = [self._call(bridge, call, tool) for call, tool in approved]
        answers.update((result.call_id, result) for result in done)
        return [answers[call.id] for call in calls]

    def _call(self, bridge: Bridge, call: ToolCall, tool: Any) -> ToolResultEvent:
        try:
            value = bridge.call_tool(tool, call.arguments)
        except Exception as exc:  # noqa: BLE001 (a tool that raises: the model reads why)
            return ToolResultEvent(
                self.name,
                call.id,
                call.name,
                f"Error: the tool {call.name} failed: {type(exc).__name__}: {exc}",
                True,
            )
        failed = isinstance(value, dict) and (value.get("success") is False or bool(value.get("error")))
        text = tool_text(value)
        return ToolResultEvent(self.name, call.id, call.name, text, failed or text.startswith("Error:"))

    def _prompt(self) -> list[dict[str, Any]]:
        self._context[:] = bound(self._context, self.model_context)
        system = [{"role": "system", "content": self.system_message}] if self.system_message else []
        return system + self._context

    # -- declarative config -------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """The agent, its model and its tools as JSON-ready data (the
        approval function is not saved: give it again to ``load``)."""
        return {
            "type": "AssistantAgent",
            "version": 1,
            "name": self.name,
            "model": self.model.to_config(),
            "tools": self.toolbox.to_config(),
            "system_message": self.system_message,
            "description": self.description,
            "max_tool_iterations": self.max_tool_iterations,
            "reflect_on_tool_use": self.reflect_on_tool_use,
            "model_context": describe(self.model_context),
            "stream_model": self.stream_model,
            "parallel_tool_calls": self.parallel_tool_calls,
        }

    @classmethod
    def from_config(
        cls, config: dict[str, Any], *, api_key: str | None = None, approval: Any = None
    ) -> AssistantAgent:
        if config.get("type") != "AssistantAgent":
            raise ConfigurationError("not an AssistantAgent config (its 'type' must be 'AssistantAgent')")
        return cls(
            config["name"],
            model_from_config(config["model"], api_key=api_key),
            _toolbox=Toolbox.from_config(config.get("tools") or ()),
            system_message=config.get("system_message"),
            description=config.get("description"),
            max_tool_iterations=config.get("max_tool_iterations", 10),
            reflect_on_tool_use=config.get("reflect_on_tool_use", False),
            approval=approval,
            model_context=from_description(config.get("model_context")),
            stream_model=config.get("stream_model", False),
            parallel_tool_calls=config.get("parallel_tool_calls", True),
        )


def _unreadable_arguments(call: ToolCall) -> str | None:
    """What is wrong with a call's arguments that are not a JSON object (None: they are one)."""
    try:
        arguments = call.parsed()
    except ValueError as exc:
        return (
            f"Error: the arguments of {call.name} are not JSON ({exc}); send a JSON object. Nothing was run."
        )
    if not isinstance(arguments, dict):
        return (
            f"Error: the arguments of {call.name} must be a JSON object, not {type(arguments).__name__}. "
            "Nothing was run."
        )
    return None
