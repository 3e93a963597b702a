"""A local HTTP server that speaks the Remyx search API over a given list of
asset dicts (the real API cannot be reached from the tests).

    with FakeRemyx([{"arxiv_id": "2010.11929v2", "title": "...", ...}]) as remyx:
        catalog = RemyxCatalog("test-key", base_url=remyx.base_url)

``base_url`` is the value for ``REMYXAI_API_URL`` (it ends in ``/api/v1.0``).
Endpoints: ``GET /search/assets/{arxiv_id}`` (404 if absent),
``POST /search/assets`` (``{query, max_results, use_llm, has_docker?,
categories?}``; 422 if max_results > 50), ``GET /search/assets/list``
(``limit, offset, has_docker, category``), ``GET /search/stats``.
A request whose ``Authorization`` is not ``Bearer <api_key>`` gets 401.

Set ``status`` (e.g. 500, 503) to answer every request with that error,
``invalid_json`` to answer 200 with a body that is not JSON, ``delay_s`` to
answer late. ``requests`` records each request as a ``Request`` (method,
path, query, body, authorization).
"""

from __future__ import annotations

import json
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

PREFIX = "/api/v1.0"


@dataclass
class Request:
    method: str
    path: str  # without the /api/v1.0 prefix and the query string
    query: dict[str, str] = field(default_factory=dict)
    body: Any = None
    authorization: str | None = None


class FakeRemyx:
    def __init__(
        self,
        assets: Sequence[dict[str, Any]] = (),
        *,
        api_key: str = "test-key",
        status: int | None = None,
        invalid_json: bool = False,
        delay_s: float = 0,
    ) -> None:
        self.assets: list[dict[str, Any]] = [dict(a) for a in assets]
        self.api_key = api_key
        self.status = status
        self.invalid_json = invalid_json
        self.delay_s = delay_s
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{PREFIX}"

    @property
    def authorization(self) -> list[str | None]:
        """The Authorization header of each request, in order."""
        return [r.authorization for r in self.requests]

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- the API's answers ---------------------------------------------------

    def answer(self, request: Request) -> tuple[int, Any]:
        if request.authorization != f"Bearer {self.api_key}":
            return 401, {"detail": "Invalid or missing API key"}
        if self.status is not None:
            return self.status, {"detail": f"fake failure {self.status}"}
        path = request.path.rstrip("/")
        if request.method == "POST" and path == "/search/assets":
            return self._search(request.body if isinstance(request.body, dict) else {})
        if request.method == "GET" and path == "/search/assets/list":
            return self._list(request.query)
        if request.method == "GET" and path == "/search/stats":
            return 200, {
                "total_assets": len(self.assets),
                "with_docker": sum(1 for a in self.assets if _has_docker(a)),
            }
        if request.method == "GET" and path.startswith("/search/assets/"):
            arxiv_id = urllib.parse.unquote(path[len("/search/assets/") :])
            for asset in self.assets:
                if asset.get("arxiv_id") == arxiv_id:
                    return 200, asset
            return 404, {"detail": f"Asset {arxiv_id} not found"}
        return 404, {"detail": f"Not Found: {request.method} {request.path}"}

    def _search(self, body: dict[str, Any]) -> tuple[int, Any]:
        query = str(body.get("query") or "")
        max_results = int(body.get("max_results", 10))
        if not query or max_results > 50 or max_results < 1:
            return 422, {"detail": "query is required and max_results must be 1..50"}
        words = query.lower().split()
        found = [
            a
            for a in self._filtered(body.get("has_docker"), body.get("categories") or [])
            if all(w in _text(a) for w in words)
        ]
        return 200, {
            "assets": found[:max_results],
            "total": len(found),
            "query": query,
            "strategy": "llm" if body.get("use_llm") else "keyword",
        }

    def _list(self, query: dict[str, str]) -> tuple[int, Any]:
        has_docker = {"true": True, "false": False}.get(query.get("has_docker", "").lower())
        category = query.get("category")
        found = self._filtered(has_docker, [category] if category else [])
        offset, limit = int(query.get("offset", 0)), int(query.get("limit", 20))
        return 200, {"assets": found[offset : offset + limit], "total": len(found)}

    def _filtered(self, has_docker: bool | None, categories: list[str]) -> list[dict[str, Any]]:
        return [
            a
            for a in self.assets
            if (has_docker is None or _has_docker(a) == has_docker)
            and (not categories or set(categories) & set(a.get("categories") or []))
        ]


def _has_docker(asset: dict[str, Any]) -> bool:
    return bool(asset.get("has_docker", bool(asset.get("docker_image"))))


def _text(asset: dict[str, Any]) -> str:
    parts = [str(asset.get(k) or "") for k in ("arxiv_id", "title", "abstract")]
    return " ".join(parts).lower()


def _handler(fake: FakeRemyx) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def _handle(self, method: str) -> None:
            url = urllib.parse.urlsplit(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
            path = url.path[len(PREFIX) :] if url.path.startswith(PREFIX + "/") else url.path
            request = Request(
                method, path, dict(urllib.parse.parse_qsl(url.query)), body, self.headers.get("Authorization")
            )
            with fake._lock:
                fake.requests.append(request)
            if fake.delay_s:
                time.sleep(fake.delay_s)
            if not url.path.startswith(PREFIX + "/"):
                status, data = 404, {"detail": f"Not Found: {url.path}"}
            else:
                status, data = fake.answer(request)
            if status == 200 and fake.invalid_json:
                self._send(200, b"<html>Service temporarily unavailable</html>", "text/html")
            else:
                self._send(status, json.dumps(data).encode(), "application/json")

        def _send(self, status: int, raw: bytes, content_type: str) -> None:
            try:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                pass

    return Handler
