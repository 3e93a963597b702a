"""A local HTTP server that speaks the OpenAI chat-completions protocol with
scripted replies (the model is the one part of the loop that cannot run here).

    with FakeModel(["```python\\nprint(1)\\n```", "Done. TERMINATE"]) as model:
        client = ModelClient("fake-model", base_url=model.base_url, api_key="k")

Each POST /v1/chat/completions takes the next reply of the script. A reply is
a string (the content) or a dict with any of:
``content``, ``reasoning_content`` (a thought, as DeepSeek/vLLM send it),
``status`` + ``error`` (answer with that HTTP error instead),
``reject_response_format`` (answer 400 when the request asks for
``response_format``, like a server without structured output; the reply is
then kept for the retry), ``prompt_tokens`` / ``completion_tokens``, and
``tool_calls``: a list of ``{"name", "arguments" (a dict or a JSON string),
"id"?}`` sent as the assistant's function calls (finish reason
``tool_calls``; streamed as the real API streams them, arguments in pieces).
A callable reply is called with the request body and returns one of those.
Streaming requests get server-sent events, with a usage chunk when
``stream_options.include_usage`` is set. ``requests`` keeps every request
body; ``authorization`` every Authorization header.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import Any

from scripted_server import JsonHandler, Reply, ScriptedServer


class FakeModel(ScriptedServer):
    def __init__(self, script: Sequence[Reply] = (), *, model: str = "fake-model") -> None:
        super().__init__(script, _handler(self))
        self.model = model
        self.authorization: list[str | None] = []

    @property
    def base_url(self) -> str:
        return self.root_url + "/v1"

    def _next(self, body: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            if not self.script:
                return {"status": 500, "error": "the fake model's script is used up"}
            reply = self.script[0]
            if callable(reply):
                reply = reply(body)
            reply = {"content": reply} if isinstance(reply, str) else dict(reply)
            if reply.get("reject_response_format") and body.get("response_format"):
                return {"status": 400, "error": "response_format is not supported by this server"}
            self.script.pop(0)
            return reply


def _handler(fake: FakeModel) -> type[BaseHTTPRequestHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._json(200, {"object": "list", "data": [{"id": fake.model, "object": "model"}]})
            else:
                self._json(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if not self.path.endswith("/chat/completions"):
                self._json(404, {"error": {"message": f"no route {self.path}"}})
                return
            with fake._lock:
                fake.requests.append(body)
                fake.authorization.append(self.headers.get("Authorization"))
            reply = fake._next(body)
            if "status" in reply:
                self._json(
                    reply["status"],
                    {"error": {"message": reply.get("error", "error"), "type": "invalid_request_error"}},
                )
                return
            usage = {
                "prompt_tokens": reply.get("prompt_tokens", _tokens(body["messages"])),
                "completion_tokens": reply.get("completion_tokens", _words(reply.get("content") or "")),
            }
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            if body.get("stream"):
                self._stream(body, reply, usage)
                return
            message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
            if "reasoning_content" in reply:
                message["reasoning_content"] = reply["reasoning_content"]
            calls = _tool_calls(reply, len(fake.requests))
            if calls:
                message["tool_calls"] = calls
            self._json(
                200,
                {
                    "id": f"chatcmpl-{len(fake.requests)}",
                    "object": "chat.completion",
                    "created": int(time.time()),
                    "model": body.get("model", fake.model),
                    "choices": [
                        {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
                    ],
                    "usage": usage,
                },
            )

        def _stream(self, body: dict[str, Any], reply: dict[str, Any], usage: dict[str, int]) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            base = {
                "id": f"chatcmpl-{len(fake.requests)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": body.get("model", fake.model),
            }
            deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
            if reply.get("reasoning_content"):
                deltas.append({"reasoning_content": reply["reasoning_content"]})
            content = reply.get("content") or ""
            deltas += [{"content": content[i : i + 7]} for i in range(0, len(content), 7)]
            calls = _tool_calls(reply, len(fake.requests))
            for index, call in enumerate(calls):
                arguments = call["function"]["arguments"]
                deltas.append(
                    {
                        "tool_calls": [
                            {
                                "index": index,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
                deltas += [
                    {"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + 5]}}]}
                    for i in range(0, len(arguments), 5)
                ]
            for i, delta in enumerate(deltas):
                finish = ("tool_calls" if calls else "stop") if i == len(deltas) - 1 else None
                self._event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                self._event({**base, "choices": [], "usage": usage})
            self.wfile.write(b"data: [DONE]\n\n")
            self.wfile.flush()
            self.close_connection = True

        def _event(self, data: dict[str, Any]) -> None:
            self.wfile.write(b"data: " + json.dumps(data).encode() + b"\n\n")
            self.wfile.flush()

    return Handler


def _tool_calls(reply: dict[str, Any], serial: int) -> list[dict[str, Any]]:
    calls = []
    for index, call in enumerate(reply.get("tool_calls") or ()):
        arguments = call.get("arguments", {})
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        calls.append(
            {
                "id": call.get("id") or f"call_{serial}_{index}",
                "type": "function",
                "function": {"name": call["name"], "arguments": arguments},
            }
        )
    return calls


def _words(text: str) -> int:
    return max(1, len(text.split()))


def _tokens(messages: list[dict[str, Any]]) -> int:
    return sum(_words(str(m.get("content") or "")) for m in messages)
