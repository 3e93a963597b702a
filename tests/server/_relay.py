"""A TCP relay on loopback between a client and a real server, whose
``sever()`` cuts every connection open at that moment (both ends closed,
as a network that fails would): a dropped stream for real, no mock. It
keeps what the client sent, to see the requests that followed."""

from __future__ import annotations

import socket
import threading
from typing import Self
from urllib.parse import urlsplit

__all__ = ["Relay"]


class Relay:
    def __init__(self, target_url: str) -> None:
        target = urlsplit(target_url)
        self._target = (target.hostname or "127.0.0.1", target.port or 80)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []
        self._sent = bytearray()
        self.severed = 0
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def sent(self) -> bytes:
        """Every byte the client sent through the relay."""
        with self._lock:
            return bytes(self._sent)

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self._listener.accept()
            except OSError:
                return  # closed
            far = socket.create_connection(self._target)
            with self._lock:
                self._open += [near, far]
            threading.Thread(target=self._pump, args=(near, far, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(far, near, False), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, outgoing: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if outgoing:
                    with self._lock:
                        self._sent += data
                sink.sendall(data)
        except OSError:
            pass
        finally:  # one side ended: end the other (its pump then ends too)
            for sock in (source, sink):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def sever(self) -> None:
        """Cut every connection open now; later ones pass again."""
        with self._lock:
            cut, self._open = self._open, []
            self.severed += len(cut) // 2
        for sock in cut:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def close(self) -> None:
        self._listener.close()
        self.sever()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
