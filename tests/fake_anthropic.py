"""A local HTTP server that speaks Anthropic's Messages API with scripted
replies (the model cannot run here), as tests/fake_llm.py does for chat
completions.

    with FakeAnthropic(["Hello"]) as fake:
        client = AnthropicClient("claude-test", base_url=fake.base_url, api_key="k")

Each POST /v1/messages takes the next reply of the script: a string (the
text) or a dict with any of ``content`` (text), ``thinking`` (a thinking
block, signed), ``tool_calls`` (``[{"name", "arguments": dict, "id"?}]`` as
``tool_use`` blocks), ``status`` + ``error`` (answer with that HTTP error),
``input_tokens`` / ``output_tokens``. A callable reply gets the request body.

The server checks requests as the real API does and answers 400 with its
error shape when one is wrong: ``max_tokens`` missing, a ``system`` role
inside ``messages``, turns that do not alternate or do not start with the
user, a ``tool_result`` whose id no ``tool_use`` of the previous assistant
turn has (or a ``tool_use`` left without its result), a tool without
``input_schema``, and, with ``thinking`` on, an assistant turn that called
a tool without sending its thinking block back first.
``stream: true`` gets the API's server-sent events, text and tool input in
pieces. ``requests`` keeps every request body; ``api_keys`` the key each
came with (``x-api-key``, or the ``Authorization`` the SDK 2.x sends).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from scripted_server import JsonHandler, Reply, ScriptedServer


class FakeAnthropic(ScriptedServer):
    def __init__(self, script: Sequence[Reply] = ()) -> None:
        super().__init__(script, _handler(self))
        self.api_keys: list[str | None] = []

    @property
    def base_url(self) -> str:
        return self.root_url

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if not self.script:
                return {"status": 500, "error": "the fake model's script is used up"}
            reply = self.script.pop(0)
        if callable(reply):
            reply = reply(body)
        return {"content": reply} if isinstance(reply, str) else dict(reply)


def invalid(body: dict[str, Any]) -> str | None:
    """What the real API would refuse in this request, or None."""
    if not isinstance(body.get("max_tokens"), int):
        return "max_tokens: Field required"
    messages = body.get("messages") or []
    if not messages or messages[0].get("role") != "user":
        return "messages: the first message must use the user role"
    pending: set[str] = set()
    for n, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{n}.role: Input should be 'user' or 'assistant'"
        if n and messages[n - 1].get("role") == role:
            return f"messages.{n}: roles must alternate between user and assistant"
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        if role == "user":
            results = {b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"}
            if results - pending:
                return (
                    f"messages.{n}: unexpected tool_use_id in tool_result blocks: {sorted(results - pending)}"
                )
            if pending - results:
                return (
                    f"messages.{n}: tool_use ids were found without tool_result blocks immediately after: "
                    f"{sorted(pending - results)}"
                )
            pending = set()
        else:
            pending = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            if (
                pending
                and body.get("thinking")
                and blocks[0].get("type") not in ("thinking", "redacted_thinking")
            ):
                return (
                    f"messages.{n}.content.0.type: Expected `thinking` or `redacted_thinking`, but found "
                    f"`{blocks[0].get('type')}`. When `thinking` is enabled, a final `assistant` message must "
                    "start with a thinking block"
                )
    if pending:
        return "the last assistant turn called tools whose results were not sent"
    for tool in body.get("tools") or ():
        if "input_schema" not in tool:
            return "tools.0.input_schema: Field required"
    return None


def _handler(fake: FakeAnthropic) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.rstrip("/").endswith("/v1/messages"):
                self._error(404, "not_found_error", f"no route {self.path}")
                return
            with fake._lock:
                fake.requests.append(body)
                fake.api_keys.append(self.headers.get("x-api-key") or self.headers.get("Authorization"))
            problem = invalid(body)
            if problem:
                self._error(400, "invalid_request_error", problem)
                return
            reply = fake._next(body)
            if "status" in reply:
                self._error(reply["status"], "api_error", reply.get("error", "error"))
                return
            message = _message(body, reply, len(fake.requests))
            if body.get("stream"):
                self._stream(message)
            else:
                self._json(200, message)

        def _stream(self, message: dict[str, Any]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            blocks = message["content"]
            start = {
                **message,
                "content": [],
                "stop_reason": None,
                "usage": {"input_tokens": message["usage"]["input_tokens"], "output_tokens": 1},
            }
            self._event("message_start", {"type": "message_start", "message": start})
            for index, block in enumerate(blocks):
                empty = {
                    "text": {"type": "text", "text": ""},
                    "thinking": {"type": "thinking", "thinking": "", "signature": ""},
                    "tool_use": {**block, "input": {}},
                }[block["type"]]
                self._event(
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": empty},
                )
                for delta in _deltas(block):
                    self._event(
                        "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}
                    )
                self._event("content_block_stop", {"type": "content_block_stop", "index": index})
            self._event(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                    "usage": {"output_tokens": message["usage"]["output_tokens"]},
                },
            )
            self._event("message_stop", {"type": "message_stop"})
            self.close_connection = True

        def _event(self, name: str, data: dict[str, Any]) -> None:
            self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            self.wfile.flush()

        def _error(self, status: int, kind: str, message: str) -> None:
            self._json(status, {"type": "error", "error": {"type": kind, "message": message}})

    return Handler


def _message(body: dict[str, Any], reply: dict[str, Any], serial: int) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = []
    if reply.get("thinking"):
        blocks.append({"type": "thinking", "thinking": reply["thinking"], "signature": f"sig-{serial}"})
    if reply.get("content"):
        blocks.append({"type": "text", "text": reply["content"]})
    for index, call in enumerate(reply.get("tool_calls") or ()):
        arguments = call.get("arguments", {})
        blocks.append(
            {
                "type": "tool_use",
                "id": call.get("id") or f"toolu_{serial}_{index}",
                "name": call["name"],
                "input": json.loads(arguments) if isinstance(arguments, str) else arguments,
            }
        )
    words = sum(len(str(m.get("content")).split()) for m in body["messages"])
    return {
        "id": f"msg_{serial}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model"),
        "content": blocks,
        "stop_reason": "tool_use" if reply.get("tool_calls") else "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": reply.get("input_tokens", max(1, words)),
            "output_tokens": reply.get("output_tokens", max(1, len(str(reply.get("content")).split()))),
        },
    }


def _deltas(block: dict[str, Any]) -> list[dict[str, Any]]:
    if block["type"] == "text":
        text = block["text"]
        return [{"type": "text_delta", "text": text[i : i + 7]} for i in range(0, len(text), 7)]
    if block["type"] == "thinking":
        return [
            {"type": "thinking_delta", "thinking": block["thinking"]},
            {"type": "signature_delta", "signature": block["signature"]},
        ]
    raw = json.dumps(block["input"])
    return [{"type": "input_json_delta", "partial_json": raw[i : i + 5]} for i in range(0, len(raw), 5)]
