"""What the local fake model servers share (``fake_llm`` speaks chat
completions, ``fake_anthropic`` the Messages API): a threaded HTTP server
on a free loopback port, a script of replies, and a JSON-answering handler."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self, TypeVar

Reply = str | dict[str, Any] | Callable[[dict[str, Any]], "str | dict[str, Any]"]
S = TypeVar("S", bound="ScriptedServer")


class ScriptedServer:
    """``script``: the replies, taken in order; ``requests``: every request body."""

    def __init__(self, script: Sequence[Reply], handler: type[BaseHTTPRequestHandler]) -> None:
        self.script: list[Reply] = list(script)
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self.script)


class JsonHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _json(self, status: int, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)
