"""One OpenAI-compatible chat client (OpenAI, Ollama, vLLM, llama.cpp...).

    model = ModelClient("gpt-4o-mini")                       # OPENAI_API_KEY
    model = ModelClient("qwen2.5-coder", base_url="http://localhost:11434/v1")
    reply = model.create([{"role": "user", "content": "hi"}])
    for piece in model.stream(messages): ...                 # str chunks, then the ModelReply
    decision = model.create_json(messages, {"type": "object", ...})
    reply = model.create(messages, tools=[tool.openai_schema()])   # reply.tool_calls

Tools are given in the chat-completions form (``{"type": "function",
"function": {...}}``); the context is kept in the same form (assistant
messages with ``tool_calls``, ``tool`` messages with ``tool_call_id``), so
the same context goes to ``AnthropicClient`` unchanged.

Structured output asks the server for ``response_format: json_schema``; a
server that refuses it is asked again for plain JSON (the schema in the
prompt) and the JSON is parsed from its text; the client remembers that.
Every call adds to ``model.usage`` (tokens and USD cost from the price table).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError, ModelError, install_hint
from ._json import parse_json_reply, schema_of
from ._reply import OPENAI_MESSAGE_KEYS, ModelReply, ToolCall
from ._sdk_client import SDKClient, safe_name

__all__ = ["ModelClient", "ModelReply"]

Message = Mapping[str, Any]
_THINK = re.compile(r"^\s*<think>(.*?)</think>\s*", re.DOTALL)
# Servers on this machine or a private network need no key; OpenAI does.
_LOCAL_KEY = "not-needed"


class ModelClient(SDKClient):
    """Chat with an OpenAI-compatible server.

    - ``model``: the model's name on the server.
    - ``base_url``: the server (default ``OPENAI_BASE_URL``, else OpenAI).
    - ``api_key``: sent as given; else read from the variable named by
      ``api_key_env`` (``OPENAI_API_KEY``); a server other than OpenAI may
      need none.
    - ``temperature``; ``timeout_s`` per request; ``max_retries`` on
      connection errors and 429/5xx (the SDK's backoff).
    - ``prices``: {model: (USD per million input, per million output)} on
      top of the table in ``execbox.agents.PRICES``.
    - ``structured_output``: True/False if known; None finds out.
    """

    provider = "openai"
    _base_url_env = "OPENAI_BASE_URL"
    _default_url = "https://api.openai.com/v1"
    _url_hint = "(--base-url, OPENAI_BASE_URL)"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float | None = None,
        timeout_s: float = 120.0,
        max_retries: int = 2,
        prices: Mapping[str, tuple[float, float]] | None = None,
        structured_output: bool | None = None,
    ) -> None:
        try:
            import openai
        except ImportError:
            raise ConfigurationError(f"ModelClient needs the OpenAI SDK: {install_hint('agents')}") from None
        settings = (base_url, api_key, api_key_env, temperature, timeout_s, max_retries, prices)
        key = self._settle(openai, model, "gpt-4o-mini", *settings)
        if not key:
            if self.base_url is None or "api.openai.com" in self.base_url:
                raise ConfigurationError(
                    f"no API key for OpenAI: set {api_key_env}, pass api_key=..., or give base_url= "
                    "for a server that needs none (Ollama, vLLM, llama.cpp)"
                )
            key = _LOCAL_KEY
        self.structured_output = structured_output
        self._client = openai.OpenAI(
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
        """One completion. With ``json_schema`` (a schema dict or a pydantic
        model class) the server is asked for JSON that fits it: through
        ``response_format`` where the server has it, else in the prompt.
        With ``tools`` the model may answer with ``tool_calls``;
        ``tool_choice``: "auto", "none" or "required"."""
        request = self._request(messages, tools, tool_choice)
        if json_schema is None:
            return self._reply(self._call(request))
        name, schema = schema_of(json_schema)
        if self.structured_output is not False:
            formatted = {
                **request,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": safe_name(name), "schema": schema},
                },
            }
            try:
                reply = self._reply(self._call(formatted))
            except ModelError as exc:
                if not _refused_format(exc):
                    raise
                self.structured_output = False
            else:
                self.structured_output = True
                return reply
        plain = self._request(_ask_for_json(list(messages), schema))
        return self._reply(self._call(plain))

    def create_json(self, messages: Sequence[Message], json_schema: Any) -> dict[str, Any]:
        """The JSON object the model answered, fitting ``json_schema``; from a
        server without structured output it is parsed from the text."""
        _, schema = schema_of(json_schema)
        reply = self.create(messages, json_schema=json_schema)
        return parse_json_reply(reply.content, list(schema.get("required", [])))

    def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> Iterator[str | ModelReply]:
        """The answer as it is written: text chunks, then the whole
        ``ModelReply`` (with usage when the server reports it, and the
        function calls once their arguments are complete)."""
        request = {
            **self._request(messages, tools, tool_choice),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        try:
            chunks = self._client.chat.completions.create(**request)
        except self._sdk.OpenAIError as exc:
            raise self._translate(exc) from None
        content: list[str] = []
        thought: list[str] = []
        calls: dict[int, list[str]] = {}
        usage = None
        finish = None
        try:
            for chunk in chunks:
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    finish = choice.finish_reason or finish
                    extra = getattr(choice.delta, "model_extra", None) or {}
                    reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                    if reasoning:
                        thought.append(reasoning)
                    for piece in choice.delta.tool_calls or ():
                        call = calls.setdefault(piece.index, ["", "", ""])
                        call[0] = piece.id or call[0]
                        if piece.function is not None:
                            call[1] = piece.function.name or call[1]
                            call[2] += piece.function.arguments or ""
                    if choice.delta.content:
                        content.append(choice.delta.content)
                        yield choice.delta.content
        except self._sdk.OpenAIError as exc:
            raise self._translate(exc) from None
        text, think = _split_thought("".join(content), "".join(thought) or None)
        counted = self._count(usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        made = tuple(
            ToolCall(i or f"call_{n}", name, arguments) for n, (i, name, arguments) in sorted(calls.items())
        )
        yield ModelReply(text, think, counted, self.model, finish, made)

    # -- config -------------------------------------------------------------------

    def to_config(self) -> dict[str, Any]:
        """The settings as JSON-ready data. The key itself is not saved: its
        variable's name is (``api_key_env``)."""
        return self._config(structured_output=self.structured_output)

    @classmethod
    def from_config(cls, config: Mapping[str, Any], *, api_key: str | None = None) -> ModelClient:
        client: ModelClient = cls._from_config(config, api_key)
        return client

    # -- inside -------------------------------------------------------------------

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
        tool_choice: str | None = None,
    ) -> dict[str, Any]:
        if not messages:
            raise ConfigurationError("a model call needs at least one message")
        sent = [{k: v for k, v in m.items() if k in OPENAI_MESSAGE_KEYS} for m in messages]
        request: dict[str, Any] = {"model": self.model, "messages": sent}
        if self.temperature is not None:
            request["temperature"] = self.temperature
        if tools:
            request["tools"] = [dict(t) for t in tools]
            if tool_choice:
                request["tool_choice"] = tool_choice
        return request

    def _call(self, request: dict[str, Any]) -> Any:
        try:
            return self._client.chat.completions.create(**request)
        except self._sdk.OpenAIError as exc:
            raise self._translate(exc) from None

    def _reply(self, completion: Any) -> ModelReply:
        if not completion.choices:
            raise ModelError(f"the model server at {self.where} answered with no choices")
        choice = completion.choices[0]
        message = choice.message
        extra = getattr(message, "model_extra", None) or {}
        reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        text, thought = _split_thought(message.content or "", reasoning)
        usage = completion.usage
        counted = self._count(usage.prompt_tokens if usage else 0, usage.completion_tokens if usage else 0)
        calls = tuple(
            ToolCall(c.id, c.function.name, c.function.arguments or "")
            for c in (message.tool_calls or ())
            if getattr(c, "function", None) is not None
        )
        return ModelReply(text, thought, counted, completion.model or self.model, choice.finish_reason, calls)


def _refused_format(exc: ModelError) -> bool:
    text = str(exc)
    return any(f"answered {code}" in text for code in (400, 415, 422, 501)) and (
        "response_format" in text or "json_schema" in text or "not supported" in text.lower()
    )


def _split_thought(text: str, reasoning: str | None) -> tuple[str, str | None]:
    match = _THINK.match(text)
    if match:
        inline = match.group(1).strip()
        return text[match.end() :], "\n".join(t for t in (reasoning, inline) if t) or None
    return text, reasoning or None


def _ask_for_json(messages: list[Message], schema: dict[str, Any]) -> list[Message]:
    return [
        *messages,
        {
            "role": "user",
            "content": (
                "Answer with one JSON object and nothing else. It must fit this JSON schema:\n"
                + json.dumps(schema)
            ),
        },
    ]
