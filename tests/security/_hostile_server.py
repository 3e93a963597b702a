"""A hostile ``execbox serve`` for the client's battery: a real HTTP server
on 127.0.0.1 (stdlib ``http.server``, a thread per connection), scripted
per test. Each route is a function given a ``Reply`` that writes what the
attacker wants on the socket: a status line and headers of its choice, a
body bigger or smaller than announced, bytes dripped forever, a stream
that never ends. Every request is recorded (``seen``), so that a test can
tell what the client sent, and to whom.

``stop()`` ends every endless answer (its loop looks at ``stopping``), so
that a client that would have read forever is let go when the test ends.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

SESSION = "s_hostile"
EXECUTION = "e_hostile"
SESSIONS = f"/v1/sessions/{SESSION}"
EXECUTIONS = f"{SESSIONS}/executions"
INFO = {
    "version": "0",
    "default_backend": "local",
    "backends": {
        "local": {"isolated": False, "stateful": False, "enforced": [], "languages": ["python", "sh"]}
    },
}


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class Gone(Exception):
    """The client closed the connection (or the server is stopping)."""


class Reply:
    def __init__(self, handler: BaseHTTPRequestHandler, stopping: threading.Event) -> None:
        self._handler = handler
        self.stopping = stopping

    def head(self, status: int, headers: dict[str, str] | None = None) -> None:
        self._handler.send_response(status)
        for name, value in (headers or {}).items():
            self._handler.send_header(name, value)
        self._handler.send_header("Connection", "close")
        self._handler.end_headers()
        self.flush()

    def write(self, data: bytes) -> None:
        if self.stopping.is_set():
            raise Gone
        try:
            self._handler.wfile.write(data)
            self._handler.wfile.flush()
        except OSError:
            raise Gone from None

    def flush(self) -> None:
        try:
            self._handler.wfile.flush()
        except OSError:
            raise Gone from None

    def json(self, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(value).encode()
        self.head(
            status, {"Content-Type": "application/json", "Content-Length": str(len(body)), **(headers or {})}
        )
        self.write(body)

    def forever(self, chunk: bytes, every_s: float = 0.0) -> None:
        """``chunk`` again and again until the client or the test gives up."""
        while True:
            self.write(chunk)
            if every_s:
                time.sleep(every_s)

    def stall(self) -> None:
        """Send nothing more, keeping the connection open, until the test ends."""
        self.stopping.wait()
        raise Gone

    def sse(self, headers: dict[str, str] | None = None) -> None:
        self.head(200, {"Content-Type": "text/event-stream", "X-Execution-Id": EXECUTION, **(headers or {})})

    def event(self, kind: str, data: Any, event_id: int | str | None) -> None:
        text = json.dumps(data) if not isinstance(data, str) else data
        lines = [] if event_id is None else [f"id: {event_id}"]
        self.write(("\n".join([*lines, f"event: {kind}", f"data: {text}"]) + "\n\n").encode())


Route = Callable[[Reply], None]


def result(**fields: Any) -> dict[str, Any]:
    """A well-formed result as the server sends one, with ``fields`` over it."""
    return {
        "exit_code": 0,
        "output": "",
        "stdout": "",
        "stderr": "",
        "files": [],
        "code_files": [],
        "duration_s": 0.1,
        "backend": "local",
        **fields,
    }


def run_events(reply: Reply, end: dict[str, Any] | None = None) -> None:
    """A run's stream: start, then ``end`` (default: a good result of this execution)."""
    reply.sse()
    reply.event("start", {"blocks": 1, "execution_id": EXECUTION, "session_id": SESSION}, 1)
    reply.event(
        "end", end if end is not None else {"id": EXECUTION, "status": "completed", "result": result()}, 2
    )


class HostileServer:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Route] = {}
        self.seen: list[Seen] = []
        self.stopping = threading.Event()
        self._lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, 1 << 20)) if length else b""
                path = urlsplit(self.path).path
                with owner._lock:
                    owner.seen.append(Seen(self.command, self.path, dict(self.headers.items()), body))
                route = owner.routes.get((self.command, path)) or next(
                    (
                        made
                        for (method, where), made in owner.routes.items()
                        if method == self.command and where.endswith("*") and path.startswith(where[:-1])
                    ),
                    None,
                )
                reply = Reply(self, owner.stopping)
                try:
                    if route is None:
                        reply.json({"error": {"code": "not_found", "message": f"no route {path}"}}, 404)
                    else:
                        route(reply)
                except Gone:
                    pass
                self.close_connection = True

            do_GET = do_POST = do_PUT = do_DELETE = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="hostile-server", daemon=True
        )
        self._thread.start()

    def route(self, method: str, path: str, reply: Route) -> None:
        """``reply`` answers ``method path`` (``path`` ending in ``*``: every path under it)."""
        self.routes[(method, path)] = reply

    def session_routes(self) -> None:
        """The routes of an honest session (made, info, closed): each test scripts the rest."""
        self.route("GET", "/v1/info", lambda r: r.json(INFO))
        self.route(
            "POST", "/v1/sessions", lambda r: r.json({"id": SESSION, "key": "k" * 32, "backend": "local"})
        )
        self.route("DELETE", SESSIONS, lambda r: r.json({"id": SESSION}))
        self.route("GET", SESSIONS, lambda r: r.json({"id": SESSION, "running_execution": None}))

    def requests_to(self, method: str, path: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == method and urlsplit(s.path).path == path]

    def stop(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    server = HostileServer()
    try:
        yield server
    finally:
        server.stop()
