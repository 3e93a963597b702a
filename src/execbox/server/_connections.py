"""Connections: how long an idle one is kept, what the server says about
it, and a log line (logger ``execbox.server.connections``) for every
connection the server closes before or while answering.

Why: under uvicorn's defaults an idle keep-alive connection is closed after
5 s, the idle time httpx (and so execbox's client) keeps a pooled
connection. A client that reused one at 4.99 s sent its request as the
server closed it: the request was reset unread (``httpx.ReadError``,
``RemoteProtocolError``: "Server disconnected without sending a
response"), a POST httpx does not retry, and nothing was logged (64
clients, bursts with idle gaps near 5 s: 4 of 1,500 requests). So:

- the server keeps an idle connection ``ServerConfig.keep_alive_s``
  (75 s by default, at least ``_config.MIN_KEEP_ALIVE_S``), longer than clients
  keep theirs, so that the client is the one that closes an idle
  connection, never a server racing a request in flight;
- every answer that keeps its connection says so, ``Keep-Alive:
  timeout=N`` with N a second under the server's, for the clients that
  read it;
- at the keep-alive timeout, a connection with bytes waiting (a request
  that came as the timer fired, in the same turn of the event loop) is
  read and answered, not closed. This narrows the race for clients that
  keep connections longer than the server, it cannot close it: at a
  keep-alive of 5 s it kept 16 such requests and 4 of 1,500 were still
  reset (the client sends after its check that the connection is open,
  the server closes in between);
- a request whose handler failed gets its answer in the error shape (500)
  and the connection is kept; a stream that fails after it began is closed
  (the only way left to say so) and logged with the reason.

``KeepAliveProtocol`` is uvicorn's h11 protocol with those hooks (the
keep-alive timer, the 400 uvicorn sends to what is not HTTP, a client
gone before its answer); ``ConnectionGuard`` is the outermost ASGI layer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import select
import socket
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ._errors import ApiError, error_response

__all__ = ["ConnectionGuard", "keep_alive_hint", "log", "protocol_class"]

log = logging.getLogger("execbox.server.connections")


def keep_alive_hint(keep_alive_s: float) -> int:
    """The ``Keep-Alive: timeout`` a server that closes after ``keep_alive_s`` says: a second less."""
    return max(1, int(keep_alive_s) - 1)


def _closes(headers: list[tuple[bytes, bytes]]) -> bool:
    return any(name.lower() == b"connection" and b"close" in value.lower() for name, value in headers)


class ConnectionGuard:
    """The outermost ASGI layer: the ``Keep-Alive`` header on answers that
    keep the connection, and every failure turned into an answer or, once
    an answer has begun, a logged close."""

    def __init__(self, app: ASGIApp, keep_alive_s: float) -> None:
        self.app = app
        self.keep_alive = f"timeout={keep_alive_hint(keep_alive_s)}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        began = time.monotonic()
        sent = {"start": False, "end": False}

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not _closes(headers):
                    message = {**message, "headers": [*headers, (b"keep-alive", self.keep_alive)]}
                sent["start"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                sent["end"] = True
            await send(message)

        try:
            await self.app(scope, receive, guarded_send)
        except asyncio.CancelledError:
            if sent["start"] and not sent["end"]:
                log.warning(
                    "%s: closing the connection mid-answer after %.1f s: the server is shutting down "
                    "(its grace period ran out)",
                    _what(scope),
                    time.monotonic() - began,
                )
            raise
        except Exception as exc:
            if sent["end"]:  # Starlette answered it (500, the error shape) and raised it again: logged, kept
                log.error(
                    "%s: answered 500 internal (%s: %s)", _what(scope), type(exc).__name__, exc, exc_info=exc
                )
                return
            if sent["start"]:
                log.error(
                    "%s: closing the connection mid-answer after %.1f s: the handler failed (%s: %s)",
                    _what(scope),
                    time.monotonic() - began,
                    type(exc).__name__,
                    exc,
                    exc_info=exc,
                )
                raise  # uvicorn closes it: the only way left to tell the client the answer is cut
            log.error(
                "%s: answered 500 internal (%s: %s)", _what(scope), type(exc).__name__, exc, exc_info=exc
            )
            error = ApiError(500, "internal", f"{type(exc).__name__}: {exc}")
            await error_response(error)(scope, receive, guarded_send)


def _what(scope: Scope) -> str:
    client = scope.get("client")
    who = f"{client[0]}:{client[1]}" if client else "?"
    return f"{scope.get('method', '?')} {scope.get('path', '?')} from {who}"


def _readable(transport: Any) -> bool:
    """True when the connection's socket has bytes (or the peer's FIN) not read yet."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        return bool(select.select([sock.fileno()], [], [], 0)[0])
    except (OSError, ValueError):
        return False


def no_delay(transport: Any) -> None:
    """Send each write at once (TCP_NODELAY). asyncio sets it only on a
    socket whose ``proto`` is TCP; the sockets accepted from the one
    ``execbox serve`` binds (uvicorn's ``bind_socket``: proto 0) had Nagle's
    delay, so every answer after the first on a kept connection waited
    ~40 ms for the client's delayed ACK."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _read_first(protocol: Any) -> bool:
    """Whether bytes came as the keep-alive timer fired (a request, or the
    client's close): then the timer is set again, and they are read first."""
    if not _readable(protocol.transport):
        return False
    log.debug(
        "connection from %s: unread bytes at the keep-alive timeout (a request, or the client "
        "closing it): read first",
        protocol._peer(),
    )
    protocol.timeout_keep_alive_task = protocol.loop.call_later(
        protocol.timeout_keep_alive, protocol.timeout_keep_alive_handler
    )
    return True


_protocol: Any = None


def protocol_class() -> Any:
    """uvicorn's h11 protocol with execbox's keep-alive and its log (made
    once, when uvicorn is imported)."""
    global _protocol
    if _protocol is not None:
        return _protocol
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class KeepAliveProtocol(H11Protocol):
        def _peer(self) -> str:
            return f"{self.client[0]}:{self.client[1]}" if self.client else "?"

        def _answering(self) -> bool:
            return self.cycle is not None and not self.cycle.response_complete

        def timeout_keep_alive_handler(self) -> None:
            if self.transport.is_closing() or _read_first(self):
                return
            log.debug(
                "closing the connection from %s: idle for %s s (keep-alive timeout)",
                self._peer(),
                self.timeout_keep_alive,
            )
            super().timeout_keep_alive_handler()

        def connection_made(self, transport: Any) -> None:
            no_delay(transport)
            super().connection_made(transport)

        def send_400_response(self, msg: str) -> None:
            log.warning(
                "closing the connection from %s: what it sent is not HTTP/1.1 (%s); answered 400",
                self._peer(),
                msg,
            )
            super().send_400_response(msg)

        def eof_received(self) -> Any:
            if self._answering():
                log.info(
                    "connection from %s: the client closed it before the answer to %s %s",
                    self._peer(),
                    self.scope.get("method"),
                    self.scope.get("path"),
                )
            return super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            if exc is not None and self._answering():
                log.info(
                    "connection from %s lost before the answer to %s %s (%s)",
                    self._peer(),
                    self.scope.get("method"),
                    self.scope.get("path"),
                    exc,
                )
            super().connection_lost(exc)

        def shutdown(self) -> None:
            if self._answering():
                log.info(
                    "connection from %s: closed after its answer to %s %s (the server is shutting down)",
                    self._peer(),
                    self.scope.get("method"),
                    self.scope.get("path"),
                )
            super().shutdown()

    _protocol = KeepAliveProtocol
    return _protocol
