"""Helpers of the server tests: a real ``execbox serve`` in a subprocess on
a free loopback port (with a token the test knows), a real HTTP client
(httpx) that carries it and the key of each session it opened, and the
error shape."""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import httpx

SRC = str(Path(__file__).resolve().parents[2] / "src")
KEY_HEADER = "X-Execbox-Session-Key"
SESSION_PATH = re.compile(r"^/v1/sessions/([^/]+)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    def __init__(
        self, proc: subprocess.Popen[bytes], url: str, token: str | None, log: Path | None = None
    ) -> None:
        self.proc = proc
        self.url = url
        self.token = token
        self.log = log
        self.link: str | None = None  # the link it printed, when it made its token
        self.keys: dict[str, str] = {}  # session id: its key, learnt from POST /v1/sessions

    @property
    def page_url(self) -> str:
        """The playground's link, with the token (as ``execbox serve`` prints it)."""
        return f"{self.url}/?token={self.token}" if self.token else f"{self.url}/"

    def log_text(self) -> str:
        """What the server wrote on stderr (a server started with ``log=``)."""
        assert self.log is not None, "running_server(..., log=PATH) keeps the server's stderr"
        return self.log.read_text(errors="replace")

    def client(self, *, session_keys: bool = True, **options) -> httpx.Client:  # type: ignore[no-untyped-def]
        """A client with the token; ``session_keys``: it also sends the key of
        every session a client of this server opened (as the Client does for
        its own), so that tests of other things need not carry keys."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        if session_keys:
            options["event_hooks"] = {"request": [self._send_key], "response": [self._learn_key]}
        return httpx.Client(
            base_url=self.url, headers=headers, timeout=options.pop("timeout", 30.0), **options
        )

    def _send_key(self, request: httpx.Request) -> None:
        found = SESSION_PATH.match(request.url.path)
        if found and found[1] in self.keys and KEY_HEADER not in request.headers:
            request.headers[KEY_HEADER] = self.keys[found[1]]

    def _learn_key(self, response: httpx.Response) -> None:
        if (
            response.request.method == "POST"
            and response.request.url.path == "/v1/sessions"
            and response.status_code == 201
        ):
            made = response.read() and response.json()
            if isinstance(made, dict) and "key" in made:
                self.keys[made["id"]] = made["key"]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise


@contextmanager
def running_server(
    *args: str, token: str | None = None, log: Path | None = None, access_log: bool = False
) -> Iterator[Server]:
    """``execbox serve`` with ``args`` and ``token`` (default: a random one
    the test knows; ``""``: none given, the server makes one and the test
    reads it from the link printed, as a person would; none when ``args``
    say ``--no-token``); ``log``: a file that gets its stderr (else a pipe,
    read only if it exits at the start: keep it quiet); ``access_log``: its
    stdout, where uvicorn logs each request (``--log-level info``), into
    ``log`` too."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("EXECBOX_TOKEN", None)
    printed = token == ""
    if printed and log is None:
        log = Path(tempfile.mkdtemp(prefix="execbox-serve-")) / "server.log"
    if token is None and "--no-token" not in args:
        token = secrets.token_urlsafe(16)
    argv = [
        sys.executable,
        "-m",
        "execbox.cli",
        "serve",
        "--port",
        str(port),
        *args,
        *([f"--token={token}"] if token else []),
    ]
    with contextlib.ExitStack() as files:
        stderr = files.enter_context(log.open("wb")) if log is not None else subprocess.PIPE
        stdout = stderr if access_log and log is not None else subprocess.DEVNULL
        proc = subprocess.Popen(argv, env=env, stdout=stdout, stderr=stderr)
    server = Server(proc, f"http://127.0.0.1:{port}", token, log)
    try:
        deadline = time.monotonic() + 30
        with server.client(timeout=2.0) as client:
            while True:
                if proc.poll() is not None:
                    said = server.log_text() if log is not None else proc.stderr.read().decode()  # type: ignore[union-attr]
                    raise RuntimeError(f"the server exited: {said}")
                try:
                    if client.get("/openapi.json").status_code in (200, 401):
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not answer within 30 s")
                time.sleep(0.1)
        if printed:
            server.link = printed_link(server.log_text())
            server.token = unquote(server.link.partition("?token=")[2])
        yield server
    finally:
        if proc.poll() is None:
            try:
                server.stop()
            except subprocess.TimeoutExpired:
                pass
        if proc.stderr is not None:
            proc.stderr.close()


def printed_link(log: str) -> str:
    """The playground's link with the token, as ``execbox serve`` printed it."""
    found = re.findall(r"^execbox serve: (http://\S+/\?token=\S+)$", log, re.MULTILINE)
    assert len(found) == 1, f"one link with a token is printed: {log!r}"
    return found[0]


_shared: dict[tuple[str, ...], Server] = {}
_shared_stack = contextlib.ExitStack()
atexit.register(_shared_stack.close)


def shared_server(*args: str) -> Server:
    """A server with these flags, started once for the test run (the
    contract suite and the hostile battery run the remote backend on it);
    stopped when the run exits."""
    if args not in _shared:
        _shared[args] = _shared_stack.enter_context(running_server(*args))
    return _shared[args]


def descendants(pid: int) -> list[int]:
    """Every process under ``pid`` (from /proc's children lists)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                children = (task / "children").read_text().split()
            except OSError:
                continue
            for child in map(int, children):
                if child not in found:
                    found.append(child)
                    todo.append(child)
    return found


def error_of(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """The error object of a response, checked to be in the one shape."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and isinstance(error["retryable"], bool)
    return error


def open_session(client: httpx.Client, **body: Any) -> dict[str, Any]:
    response = client.post("/v1/sessions", json=body)
    assert response.status_code == 201, response.text
    return response.json()
