"""What a Jupyter server's REST answers may be, from a real listener on
loopback that is not one: a binary protocol on the port (a port taken by
another program between its pick and the gateway's bind), an answer too
large, an answer that is not JSON. Each is a clear execbox error, never an
http.client exception, nor a read without a bound."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from execbox import BackendUnavailableError, ExecboxError
from execbox.backends.jupyter import JupyterConnectionInfo, _gateway


@contextmanager
def answering(payload: bytes) -> Iterator[int]:
    """A loopback listener that answers every connection with ``payload``."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    done = threading.Event()

    def serve() -> None:
        while not done.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    conn.recv(65536)
                    conn.sendall(payload)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        done.set()
        try:
            server.shutdown(socket.SHUT_RDWR)  # wakes the accept()
        except OSError:
            pass
        server.close()
        thread.join(timeout=5)


def http_answer(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )


def test_a_binary_protocol_on_the_port_is_named_not_raised_raw():
    with answering(b"\xff\x00\x00\x00\x01 49859\r\n") as port:
        with pytest.raises(BackendUnavailableError, match="is not an HTTP server"):
            JupyterConnectionInfo("127.0.0.1", port).request("GET", "/api/kernelspecs", timeout=5)


def test_an_answer_that_is_not_json_or_too_large_is_refused(monkeypatch):
    with answering(http_answer(b"<html>a proxy's page</html>")) as port:
        with pytest.raises(ExecboxError, match="not JSON"):
            JupyterConnectionInfo("127.0.0.1", port).request("GET", "/api/kernelspecs", timeout=5)
    monkeypatch.setattr(_gateway, "MAX_ANSWER_BYTES", 1024)
    with answering(http_answer(b'{"x": "' + b"a" * 4096 + b'"}')) as port:
        with pytest.raises(ExecboxError, match="an answer over 1024 bytes"):
            JupyterConnectionInfo("127.0.0.1", port).request("GET", "/api/kernelspecs", timeout=5)
