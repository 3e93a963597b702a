"""Connections (``execbox.server._connections``), on raw sockets against a
real server: the keep-alive it says and keeps, and the log line of each
connection it closes early (the load itself: ``test_soak.py``)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.server._http import SRC, Server, running_server

RUN = b'{"code": "import time; time.sleep(1); print(1)"}'


def _connect(server: Server) -> socket.socket:
    host, port = server.url.removeprefix("http://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _answer(sock: socket.socket) -> bytes:
    """One whole answer (headers and a Content-Length body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536) or b""
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        body += sock.recv(65536)
    return head


def _logged(server: Server, text: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    while text not in server.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    return server.log_text()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    log = tmp_path_factory.mktemp("connections") / "server.log"
    # raw requests without a token: connections, not auth, are tested here
    with running_server(
        "--backend", "local", "--no-token", "--keep-alive", "5", "--log-level", "debug", log=log
    ) as running:
        yield running


def test_an_idle_connection_is_kept_as_said_then_closed_and_logged(server: Server) -> None:
    with _connect(server) as sock:
        sock.sendall(b"GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        head = _answer(sock).lower()
        assert b"keep-alive: timeout=4" in head  # a second under the server's 5 s
        time.sleep(3.5)  # inside what it said: still open, and answered
        sock.sendall(b"GET /v1/info HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _answer(sock).startswith(b"HTTP/1.1 200")
        answered = time.monotonic()
        sock.settimeout(10)
        assert sock.recv(1) == b""  # the server closed it, idle
        assert 4.5 < time.monotonic() - answered < 8
    log = _logged(server, "(keep-alive timeout)")
    assert "execbox.server.connections: closing the connection from 127.0.0.1" in log
    assert "idle for 5.0 s (keep-alive timeout)" in log


def test_what_is_not_http_is_answered_400_and_logged(server: Server) -> None:
    with _connect(server) as sock:
        sock.sendall(b"HELLO\x00 THERE\r\n\r\n")
        assert sock.recv(65536).startswith(b"HTTP/1.1 400")
    assert "what it sent is not HTTP/1.1" in _logged(server, "not HTTP/1.1")


def test_a_client_gone_before_its_answer_is_logged(server: Server) -> None:
    with _connect(server) as sock:
        sock.sendall(
            b"POST /v1/run HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(RUN), RUN)
        )
        time.sleep(0.3)
    log = _logged(server, "before the answer to POST /v1/run")
    assert "the client closed it before the answer to POST /v1/run" in log
    assert "Traceback" not in log


def test_a_keep_alive_under_5_s_is_refused() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "execbox.cli", "serve", "--keep-alive", "2", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin"},
    )
    assert done.returncode == 2 and "--keep-alive 2.0 is under 5 s" in done.stderr, done.stderr


def test_the_log_names_its_logger(tmp_path: Path) -> None:
    with running_server("--backend", "local", "--log-level", "warning", log=tmp_path / "log") as server:
        with _connect(server) as sock:
            sock.sendall(b"\x16\x03\x01 not http\r\n\r\n")  # a TLS hello to a plain server
            sock.recv(65536)
        assert "WARNING:  execbox.server.connections: closing the connection from" in _logged(
            server, "not HTTP"
        )


def test_an_accepted_connection_sends_without_nagles_delay():
    # execbox serve binds its socket itself (uvicorn's bind_socket: proto 0), and asyncio sets
    # TCP_NODELAY only on sockets whose proto is TCP: each answer after the first on a kept
    # connection then waited ~40 ms for the client's delayed ACK (/v1/info: 44 ms, now 1.5)
    import asyncio
    import socket

    from execbox.server._connections import no_delay

    async def accepted() -> tuple[int, int]:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)  # as bind_socket makes it
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        seen: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()

        class Protocol(asyncio.Protocol):
            def connection_made(self, transport: asyncio.BaseTransport) -> None:
                sock = transport.get_extra_info("socket")
                before = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
                no_delay(transport)
                seen.set_result((before, sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)))

        server = await asyncio.get_running_loop().create_server(Protocol, sock=listener)
        _, writer = await asyncio.open_connection(*listener.getsockname())
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            server.close()
            await server.wait_closed()

    before, after = asyncio.run(accepted())
    assert before == 0, "asyncio set TCP_NODELAY itself here: no_delay may no longer be needed"
    assert after != 0
