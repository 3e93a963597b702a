"""A load generator for the service benchmarks: N callers, each on one
kept-alive HTTP/1.1 connection, sending ``POST /v1/run`` and reading the
answer by its Content-Length, on one asyncio loop.

Why not httpx: its connection pool's work per request grows with the
connections it holds. Measured on the 2-core CI machine against one
``execbox serve``: the client process spent 2.9 ms of CPU per request at 16
connections and 13.0 ms at 64, more than the server's own 7.0 ms, so at 64
clients the benchmark measured its client. This one spends about the same
per request at any count, as a load generator must (wrk, hey).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from urllib.parse import urlsplit

__all__ = ["Caller", "callers"]

MAX_HEAD = 64 * 1024
MAX_BODY = 16 * 1024 * 1024
TIMEOUT_S = 120.0


class Caller:
    """One connection; ``post`` sends one request and returns (status, body)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, limit=MAX_HEAD)

    async def post(self, path: str, payload: dict) -> tuple[int, bytes]:
        body = json.dumps(payload).encode()
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self.head}"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        for attempt in (0, 1):  # a kept connection the server closed: once more on a new one
            if self.writer is None:
                await self._connect()
            assert self.reader is not None and self.writer is not None
            try:
                self.writer.write(request)
                return await asyncio.wait_for(self._answer(), TIMEOUT_S)
            except (ConnectionError, asyncio.IncompleteReadError):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    async def _answer(self) -> tuple[int, bytes]:
        assert self.reader is not None
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length, close = None, False
        for line in lines[1:]:
            name, _, value = line.partition(":")
            name = name.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "connection" and value.strip().lower() == "close":
                close = True
        if length is None or length > MAX_BODY:
            raise ValueError(f"an answer without a usable Content-Length: {lines[:1]}")
        body = await self.reader.readexactly(length)
        if close:
            self.close()
        return status, body

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


async def callers(
    url: str,
    headers: dict[str, str],
    shares: list[int],
    call: Callable[[Caller], Awaitable[str]],
    tally: Callable[[float, str], None],
) -> None:
    """One caller per share, each making its share of ``call``s one after
    another; each call's time and output go to ``tally``."""

    async def one(count: int) -> None:
        caller = Caller(url, headers)
        try:
            for _ in range(count):
                started = time.perf_counter()
                try:
                    out = await call(caller)
                except Exception as exc:  # noqa: BLE001 - counted as wrong
                    out = f"{type(exc).__name__}: {exc}"
                tally(time.perf_counter() - started, out)
        finally:
            caller.close()

    await asyncio.gather(*(one(k) for k in shares))
