"""Anthropic's Messages API behind the same interface as ``ModelClient``.

    model = AnthropicClient("claude-sonnet-4-5")            # ANTHROPIC_API_KEY
    reply = model.create(messages, tools=[tool.openai_schema()])
    reply.tool_calls, reply.thought, model.usage

The agents keep their context in the chat-completions form; this client
translates it on each call: system messages become ``system``, an
assistant's ``tool_calls`` become ``tool_use`` blocks, ``tool`` messages
become ``tool_result`` blocks in a user turn, and consecutive turns of one
role are merged (the API wants them alternating). Thinking blocks come back
apart (``reply.thought``) and are sent back signed, as the API requires
when a turn with thinking called a tool. Structured output is a forced tool
call (``tool_choice: {"type": "tool"}``), the API's own way.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError, ModelError, install_hint
from ..tools._bounded_json import loads as bounded_loads
from ._json import schema_of
from ._reply import ModelReply, ToolCall
from ._sdk_client import SDKClient, safe_name

__all__ = ["AnthropicClient"]

Message = Mapping[str, Any]
_CHOICES = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}


class AnthropicClient(SDKClient):
    """Chat with Anthropic's Messages API (or a server speaking it).

    - ``model``: such as ``claude-sonnet-4-5``.
    - ``base_url``: default ``ANTHROPIC_BASE_URL``, else Anthropic.
    - ``api_key``, else the variable named by ``api_key_env``.
    - ``max_tokens``: the most tokens of one answer (the API requires it).
    - ``thinking_budget``: tokens of extended thinking (None: off).
    - ``temperature``, ``timeout_s``, ``max_retries``, ``prices`` as for
      ``ModelClient``.
    """

    provider = "anthropic"
    _base_url_env = "ANTHROPIC_BASE_URL"
    _default_url = "https://api.anthropic.com"
    _url_hint = "(base_url, ANTHROPIC_BASE_URL)"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "ANTHROPIC_API_KEY",
        temperature: float | None = None,
        max_tokens: int = 4096,
        thinking_budget: int | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        prices: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        try:
            import anthropic
        except ImportError:
            raise ConfigurationError(
                f"AnthropicClient needs the Anthropic SDK: {install_hint('agents')}"
            ) from None
        settings = (base_url, api_key, api_key_env, temperature, timeout_s, max_retries, prices)
        key = self._settle(anthropic, model, "claude-sonnet-4-5", *settings)
        if not key:
            raise ConfigurationError(f"no API key for Anthropic: set {api_key_env} or pass api_key=...")
        if thinking_budget is not None and not (isinstance(thinking_budget, int) and thinking_budget >= 1024):
            raise ConfigurationError("thinking_budget must be a whole number of tokens >= 1024, or None")
        self.max_tokens = max_tokens
        self.thinking_budget = thinking_budget
        self._client = anthropic.Anthropic(
            api_key=key, base_url=self.base_url, timeout=timeout_s, max_retries=max_retries
        )

    # -- calls ------------------------------------------------------------------

    def create(
        self,
        messages: Sequence[Message],
        *,
        json_schema: Any = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> ModelReply:
        """One answer; with ``tools`` it may hold ``tool_calls``. With
        ``json_schema`` the answer's ``content`` is the JSON object."""
        if json_schema is not None:
            name, schema = schema_of(json_schema)
            forced = {"name": safe_name(name), "description": "Give your answer.", "input_schema": schema}
            request = self._request(messages, None, None)
            request.pop("thinking", None)  # a forced tool call cannot follow thinking
            request.update(tools=[forced], tool_choice={"type": "tool", "name": forced["name"]})
            reply = self._reply(self._call(request))
            if not reply.tool_calls:
                raise ModelError(f"the model at {self.where} did not answer with the JSON asked for")
            return ModelReply(
                reply.tool_calls[0].arguments, reply.thought, reply.usage, reply.model, reply.finish_reason
            )
        return self._reply(self._call(self._request(messages, tools, tool_choice)))

    def create_json(self, messages: Sequence[Message], json_schema: Any) -> dict[str, Any]:
        """The JSON object the model answered, fitting ``json_schema``."""
        value = bounded_loads(self.create(messages, json_schema=json_schema).content)
        if not isinstance(value, dict):
            raise ModelError(f"the model at {self.where} answered {value!r}, not a JSON object")
        return value

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Iterator[str | ModelReply]:
        """Text chunks as they are written, then the whole ``ModelReply``."""
        request = self._request(messages, tools, tool_choice)
        try:
            with self._client.messages.stream(**request) as events:
                for event in events:
                    if event.type == "text" and event.text:
                        yield event.text
                final = events.get_final_message()
        except self._sdk.AnthropicError as exc:
            raise self._translate(exc) from None
        yield self._reply(final)

    # -- config -------------------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        return self._config(max_tokens=self.max_tokens, thinking_budget=self.thinking_budget)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, api_key: str | None = None) -> AnthropicClient:
        client: AnthropicClient = cls._from_config(config, api_key)
        return client

    # -- inside -------------------------------------------------------------------

    def _request(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None, tool_choice: str | None
    ) -> dict[str, Any]:
        if not messages:
            raise ConfigurationError("a model call needs at least one message")
        system, turns = to_anthropic(messages)
        request: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            request["system"] = system
        if self.temperature is not None and self.thinking_budget is None:
            request["temperature"] = self.temperature
        if self.thinking_budget is not None:
            request["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
        if tools:
            request["tools"] = [anthropic_tool(t) for t in tools]
            if tool_choice:
                if tool_choice not in _CHOICES:
                    raise ConfigurationError(f"tool_choice={tool_choice!r}: use 'auto', 'none' or 'required'")
                request["tool_choice"] = _CHOICES[tool_choice]
        return request

    def _call(self, request: dict[str, Any]) -> Any:
        try:
            return self._client.messages.create(**request)
        except self._sdk.AnthropicError as exc:
            raise self._translate(exc) from None

    def _reply(self, message: Any) -> ModelReply:
        text: list[str] = []
        thought: list[str] = []
        kept: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        for block in message.content:
            if block.type == "text":
                text.append(block.text)
            elif block.type == "thinking":
                thought.append(block.thinking)
                kept.append({"type": "thinking", "thinking": block.thinking, "signature": block.signature})
            elif block.type == "redacted_thinking":
                kept.append({"type": "redacted_thinking", "data": block.data})
            elif block.type == "tool_use":
                calls.append(ToolCall(block.id, block.name, json.dumps(block.input)))
        usage = message.usage
        prompt = (
            (usage.input_tokens or 0)
            + (getattr(usage, "cache_read_input_tokens", 0) or 0)
            + (getattr(usage, "cache_creation_input_tokens", 0) or 0)
        )
        counted = self._count(prompt, usage.output_tokens or 0)
        return ModelReply(
            "".join(text),
            "\n".join(thought) or None,
            counted,
            message.model or self.model,
            message.stop_reason,
            tuple(calls),
            tuple(kept),
        )


def anthropic_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A tool schema in the Messages API's form, from the chat-completions
    form (``{"type": "function", "function": {...}}``) or already in it."""
    if "input_schema" in tool:
        return dict(tool)
    function = tool.get("function")
    if not isinstance(function, Mapping) or "name" not in function:
        raise ConfigurationError(
            f"a tool schema needs a 'function' with a 'name', or an 'input_schema': {tool!r}"
        )
    return {
        "name": function["name"],
        "description": function.get("description", ""),
        "input_schema": function.get("parameters") or {"type": "object", "properties": {}},
    }


def to_anthropic(messages: Sequence[Message]) -> tuple[str, list[dict[str, Any]]]:
    """(system, turns): a chat-completions context as the Messages API takes it."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "system":
            system.append(str(message.get("content") or ""))
            continue
        if role == "tool":
            blocks = [
                {
                    "type": "tool_result",
                    "tool_use_id": message["tool_call_id"],
                    "content": str(message.get("content") or ""),
                }
            ]
            role = "user"
        elif role == "assistant":
            blocks = [dict(b) for b in message.get("thinking_blocks") or ()]
            if message.get("content"):
                blocks.append({"type": "text", "text": str(message["content"])})
            for call in message.get("tool_calls") or ():
                arguments = call["function"].get("arguments") or "{}"
                try:
                    value = bounded_loads(arguments)
                except ValueError:
                    value = {"_unparsed": arguments}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call["id"],
                        "name": call["function"]["name"],
                        "input": value if isinstance(value, dict) else {"value": value},
                    }
                )
        elif role == "user":
            content = message.get("content")
            blocks = (
                list(content) if isinstance(content, list) else [{"type": "text", "text": str(content or "")}]
            )
        else:
            raise ConfigurationError(f"a message has role {role!r}: use system, user, assistant or tool")
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    for turn in turns:  # tool results come first in their user turn
        turn["content"].sort(key=lambda b: b.get("type") != "tool_result")
    return "\n\n".join(system), turns
