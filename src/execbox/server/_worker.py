"""Which worker process this is, and the requests it passes to another.

``execbox serve --workers N`` runs N processes that accept on one socket
(``_supervisor.py``): any of them may answer a stateless run, but a session
lives in the worker that made it (its executor, its running execution, its
events), and its id names that worker (``_sessions.session_id``). A session's
request that reaches another worker, once its Host, Origin and token are
checked there, is passed on whole, body and answer streamed, over the owner's
own Unix socket in the server's private folder (``Worker.sockets``); the
owner checks it again and answers as if reached directly: the same statuses
(404, 403, 410) and the same event streams, whichever worker a connection
landed on. A client that goes away while its request is passed on (waiting
for a slot there, or reading an event stream) closes the connection to the
owner, which then sees it go (``_disconnect``: out of the line, never run).
A worker that is gone answers 503 until its replacement listens;
the sessions it held are gone with it (404). Every answer names the worker
that gave it (``X-Execbox-Worker``).

One worker (the default) passes nothing on.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._board import Board
from ._errors import ApiError, error_response
from ._sessions import owner_of

__all__ = ["SessionRouter", "Worker"]

# the worker that answered (with more than one)
WORKER_HEADER = b"x-execbox-worker"
# headers of one hop, never passed on
HOP_HEADERS = {b"connection", b"keep-alive", b"transfer-encoding", b"te", b"upgrade", b"trailer"}


@dataclass
class Worker:
    """This process's place in the server: its index among ``count``, the
    board the workers share, the folder of their Unix sockets."""

    index: int = 0
    count: int = 1
    board: Board = field(default_factory=Board)
    sockets: str = ""
    peers: dict[int, Any] = field(default_factory=dict, repr=False)  # index: httpx.AsyncClient

    def socket_path(self, index: int) -> str:
        return os.path.join(self.sockets, f"worker-{index}.sock")

    async def aclose(self) -> None:
        for client in self.peers.values():
            await client.aclose()
        self.peers.clear()


class SessionRouter:
    """Pass a request about a session that another worker owns to that worker."""

    def __init__(self, app: ASGIApp, worker: Worker, read_timeout_s: float) -> None:
        self.app = app
        self.worker = worker
        self.read_timeout_s = read_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.worker.count == 1:
            await self.app(scope, receive, send)
            return
        owner = self._owner(scope["path"])
        if owner is not None:
            await self._forward(owner, scope, receive, send)
            return
        said = str(self.worker.index).encode()

        async def send_saying_worker(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), (WORKER_HEADER, said)]}
            await send(message)

        await self.app(scope, receive, send_saying_worker)

    def _owner(self, path: str) -> int | None:
        """The other worker that owns the session in ``path``, if any."""
        parts = path.split("/", 4)
        if len(parts) < 4 or parts[1:3] != ["v1", "sessions"]:
            return None
        owner = owner_of(parts[3])
        if owner is None or owner == self.worker.index or owner >= self.worker.count:
            return None  # its own, or never made by this server (404 here)
        return owner

    def _client(self, owner: int) -> Any:
        import httpx

        client = self.worker.peers.get(owner)
        if client is None:
            timeout = httpx.Timeout(connect=10.0, read=self.read_timeout_s, write=60.0, pool=10.0)
            # as many connections to the owner as requests passed on (each holds a client's own
            # connection here), so that event streams held open never make another request wait
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=64)
            transport = httpx.AsyncHTTPTransport(uds=self.worker.socket_path(owner), limits=limits)
            client = httpx.AsyncClient(transport=transport, timeout=timeout)
            self.worker.peers[owner] = client
        return client

    async def _forward(self, owner: int, scope: Scope, receive: Receive, send: Send) -> None:
        query = scope.get("query_string", b"")
        url = "http://worker" + scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if query:
            url += "?" + query.decode("latin-1")
        headers = [(k, v) for k, v in scope["headers"] if k.lower() not in HOP_HEADERS]
        client = self._client(owner)
        read, answering = asyncio.Event(), asyncio.Event()
        request = client.build_request(scope["method"], url, headers=headers, content=_body(receive, read))
        passing = asyncio.ensure_future(self._pass(owner, client, request, scope, receive, send, answering))
        watch = asyncio.ensure_future(_cancel_when_gone(receive, read, answering, passing))
        try:
            await asyncio.wait({passing})
        finally:  # also when this handler is cancelled itself (the server stops)
            watch.cancel()
            if not passing.done():
                passing.cancel()
                await asyncio.wait({passing})
        if not passing.cancelled():  # cancelled: its client left, no one to answer
            passing.result()

    async def _pass(
        self,
        owner: int,
        client: Any,
        request: Any,
        scope: Scope,
        receive: Receive,
        send: Send,
        answering: asyncio.Event,
    ) -> None:
        """Send ``request`` to worker ``owner`` and its answer to the client."""
        import httpx

        try:
            response = await client.send(request, stream=True)
        except httpx.TransportError as exc:
            error = ApiError(
                503,
                "worker_unavailable",
                f"worker {owner} of this server, which holds this session, does not answer "
                f"({type(exc).__name__}); retry: a restarted worker no longer has the session",
                retryable=True,
                headers={"Retry-After": "1"},
            )
            answering.set()
            await error_response(error)(scope, receive, send)
            return
        try:
            await send(
                {
                    "type": "http.response.start",
                    "status": response.status_code,
                    "headers": [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_HEADERS],
                }
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            answering.set()  # the answer ends: the disconnect that follows is not a client leaving
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await response.aclose()


async def _body(receive: Receive, read: asyncio.Event) -> AsyncIterator[bytes]:
    """The request's body as the client sends it (a disconnect ends the
    pass); ``read`` set once it has all been read."""
    while True:
        message: Message = await receive()
        if message["type"] == "http.disconnect":
            raise ConnectionResetError("the client went away while its request was passed on")
        yield message.get("body", b"")
        if not message.get("more_body", False):
            read.set()
            return


async def _cancel_when_gone(
    receive: Receive, read: asyncio.Event, answering: asyncio.Event, passing: asyncio.Future[None]
) -> None:
    """Once the body is read, wait for the client's disconnect: before its
    answer ends, cancel ``passing`` (which closes the connection to the owner)."""
    await read.wait()
    try:
        while (await receive())["type"] != "http.disconnect":
            pass
    except Exception:  # noqa: BLE001 - a connection that cannot be read is one whose client is gone
        pass
    if not answering.is_set():
        passing.cancel()
