"""Where a Jupyter kernel runs: behind a Kernel Gateway (or any Jupyter
server speaking its REST + WebSocket API), on this machine or another.

REST (``/api/kernels``) starts, interrupts, restarts and deletes the kernel;
one WebSocket (``/api/kernels/{id}/channels``) carries the messages of all
channels as JSON, each tagged with its channel. The token goes in the
``Authorization`` header of both.

Latency: the server writes each message as a small TCP segment, with Nagle's
algorithm on (tornado leaves it on for WebSockets); a second segment waits
for the ACK of the first, and a Linux client delays its ACKs by up to 40 ms.
That was a ~44 ms floor per cell. The client turns delayed ACKs off
(TCP_QUICKACK, re-armed after every read, as Linux resets it) and Nagle off
for its own sends, so the floor goes without any change on the server.
"""

from __future__ import annotations

import datetime
import http.client
import json
import socket
import ssl
import time
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any

from ..._codec import register_option_type
from ..._errors import BackendUnavailableError, ExecboxError, install_hint
from .._process import TOKEN_VAR
from ._channels import execute, wait_ready
from ._kernel import kill_started_by
from ._kernel_base import Kernel

__all__ = ["GatewayKernel", "JupyterConnectionInfo", "WebSocketChannels"]

HINT = install_hint("jupyter")  # websocket-client
REQUEST_TIMEOUT_S = 30.0
MAX_ANSWER_BYTES = 16 << 20  # a REST answer (kernel specs, a kernel's model): far less
READY_TIMEOUT_S = 60.0
TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


@dataclass(frozen=True)
class JupyterConnectionInfo:
    """Where a Jupyter Kernel Gateway (or Jupyter server) listens.

    ``token``: its auth token (sent as ``Authorization: token ...``);
    ``use_https``: https/wss instead of http/ws. ``shared_files``: the
    server sees this machine's files at the same paths (a server on this
    machine): kernels then start each block in the executor's workspace."""

    host: str
    port: int
    use_https: bool = False
    token: str | None = None
    shared_files: bool = False

    @property
    def base_url(self) -> str:
        return f"{'https' if self.use_https else 'http'}://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"{'wss' if self.use_https else 'ws'}://{self.host}:{self.port}"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"token {self.token}"} if self.token else {}

    def request(self, method: str, path: str, body: Any = None, timeout: float = REQUEST_TIMEOUT_S) -> Any:
        """One REST call; its JSON answer (None when empty). Clear errors for
        a server that is not there and for a refused token."""
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base_url + path,
            data=data,
            method=method,
            headers={**self.headers(), "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=timeout) as answer:
                raw = answer.read(MAX_ANSWER_BYTES + 1)
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:300].decode("utf-8", "replace")
            if exc.code in (401, 403):
                raise BackendUnavailableError(
                    "jupyter",
                    f"the Jupyter server at {self.base_url} refused the token ({exc.code}): "
                    "pass its token in JupyterConnectionInfo(token=...)",
                ) from exc
            raise ExecboxError(f"Jupyter server {method} {path} failed ({exc.code}): {detail}") from exc
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BackendUnavailableError(
                "jupyter",
                f"no Jupyter server answers at {self.base_url} ({reason}): start one "
                "(LocalJupyterServer(), or `jupyter kernelgateway`) or fix host/port",
            ) from exc
        except http.client.HTTPException as exc:  # something else listens there (a port taken meanwhile)
            raise BackendUnavailableError(
                "jupyter",
                f"what answers at {self.base_url} is not an HTTP server ({type(exc).__name__}): "
                "fix host/port",
            ) from exc
        if len(raw) > MAX_ANSWER_BYTES:
            raise ExecboxError(f"Jupyter server {method} {path}: an answer over {MAX_ANSWER_BYTES} bytes")
        try:
            return json.loads(raw) if raw.strip() else None
        except ValueError as exc:
            raise ExecboxError(f"Jupyter server {method} {path}: an answer that is not JSON ({exc})") from exc


register_option_type("jupyter-connection", JupyterConnectionInfo)


class WebSocketChannels:
    """The kernel's channels over the server's WebSocket (JSON messages)."""

    def __init__(self, info: JupyterConnectionInfo, kernel_id: str) -> None:
        try:
            import websocket
        except ImportError as exc:
            raise BackendUnavailableError("jupyter", f"websocket-client is not installed: {HINT}") from exc
        self._timeout_error = websocket.WebSocketTimeoutException
        self._closed_error = websocket.WebSocketConnectionClosedException
        self.session = uuid.uuid4().hex
        self.dead = False  # the server said the kernel died (or the connection dropped)
        options: list[tuple[int, int, int]] = [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)]
        sslopt = {"cert_reqs": ssl.CERT_REQUIRED} if info.use_https else None
        url = f"{info.ws_url}/api/kernels/{kernel_id}/channels?session_id={self.session}"
        try:
            self._ws = websocket.create_connection(
                url, header=info.headers(), sockopt=options, sslopt=sslopt, timeout=REQUEST_TIMEOUT_S
            )
        except Exception as exc:
            raise BackendUnavailableError(
                "jupyter", f"cannot open the kernel's WebSocket at {url}: {exc}"
            ) from exc
        self._quickack()

    def _quickack(self) -> None:
        if TCP_QUICKACK is not None:
            sock = self._ws.sock
            if sock is None:
                return
            try:
                sock.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
            except (OSError, AttributeError):
                pass

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        msg_id = uuid.uuid4().hex
        header = {
            "msg_id": msg_id,
            "msg_type": msg_type,
            "username": "execbox",
            "session": self.session,
            "version": "5.3",
            "date": datetime.datetime.now(datetime.UTC).isoformat(),
        }
        message = {
            "header": header,
            "parent_header": {},
            "metadata": {},
            "content": content,
            "channel": channel,
            "buffers": [],
        }
        try:
            self._ws.send(json.dumps(message))
        except (OSError, self._closed_error) as exc:
            self.dead = True
            raise BackendUnavailableError("jupyter", f"the kernel's WebSocket closed: {exc}") from exc
        return msg_id

    def recv(self, timeout: float) -> tuple[str, dict[str, Any]] | None:
        if self.dead:
            return None
        self._ws.settimeout(max(timeout, 0.001))
        try:
            raw = self._ws.recv()
        except self._timeout_error:
            return None
        except (OSError, self._closed_error):
            self.dead = True
            return None
        finally:
            self._quickack()
        if not raw:
            return None
        msg = json.loads(raw)
        if msg.get("msg_type") == "status" and msg.get("content", {}).get("execution_state") in (
            "dead",
            "restarting",
        ):
            self.dead = True  # the server's own news of a kernel death (it restarts it by itself)
        return msg.get("channel", "iopub"), msg

    def close(self) -> None:
        try:
            self._ws.close(timeout=1)
        except Exception:  # noqa: BLE001 - closing a dead socket
            pass


class GatewayKernel(Kernel):
    """A kernel on a Jupyter server, driven over REST and one WebSocket."""

    def __init__(
        self,
        info: JupyterConnectionInfo,
        *,
        kernel_name: str | None = None,
        env: dict[str, str] | None = None,
        token: str | None = None,
    ) -> None:
        self.info = info
        self.token = token
        self.kernel_name = kernel_name
        self.env = {k: v for k, v in (env or {}).items() if k.startswith("KERNEL_")}
        self.kernel_id: str | None = None
        self.channels: WebSocketChannels | None = None

    @property
    def shares_files(self) -> bool:
        return self.info.shared_files

    def start(self) -> None:
        body: dict[str, Any] = {"env": self.env}
        if self.kernel_name:
            body["name"] = self.kernel_name
        model = self.info.request("POST", "/api/kernels", body)
        self.kernel_id = model["id"]
        self._connect()

    def _connect(self) -> None:
        assert self.kernel_id is not None
        self.channels = WebSocketChannels(self.info, self.kernel_id)
        wait_ready(
            self.channels,
            self.alive,
            READY_TIMEOUT_S,
            lambda: f"kernel {self.kernel_id} at {self.info.base_url}",
        )
        if self.info.shared_files and self.token:
            self.pid = self._mark()

    def _mark(self) -> int | None:
        """On this machine: the kernel's pid, and our token in its
        environment (what its cells start inherits it), for kill_strays."""
        assert self.channels is not None
        code = f"import os as __execbox_os\n__execbox_os.environ[{TOKEN_VAR!r}] = {self.token!r}"
        msg_id = execute(self.channels, code, silent=True, user_expressions={"pid": "__execbox_os.getpid()"})
        end = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < end:
            got = self.channels.recv(0.1)
            if got is None:
                if not self.alive():
                    return None
                continue
            channel, msg = got
            if channel == "shell" and msg.get("parent_header", {}).get("msg_id") == msg_id:
                value = msg["content"].get("user_expressions", {}).get("pid", {})
                try:
                    return int(value.get("data", {}).get("text/plain", ""))
                except ValueError:
                    return None
        return None

    def alive(self) -> bool:
        return self.channels is not None and not self.channels.dead

    def interrupt(self) -> None:
        if self.kernel_id is not None:
            self.info.request("POST", f"/api/kernels/{self.kernel_id}/interrupt")

    def kill_strays(self) -> None:
        """What the last cell started, for a server on this machine (a
        remote server's processes are its own to manage)."""
        kill_started_by(self.pid, self.token)

    def restart(self) -> None:
        """A fresh kernel process (state lost), on the same kernel id."""
        if self.channels is not None:
            self.channels.close()
        if self.kernel_id is not None:
            try:
                self.info.request("POST", f"/api/kernels/{self.kernel_id}/restart", timeout=READY_TIMEOUT_S)
            except ExecboxError:
                self.kernel_id = None  # gone for good on the server: a new one
        if self.kernel_id is None:
            self.start()
        else:
            self._connect()
        self.restarted = True

    def stop(self) -> None:
        if self.channels is not None:
            self.channels.close()
            self.channels = None
        if self.kernel_id is not None:
            try:
                self.info.request("DELETE", f"/api/kernels/{self.kernel_id}", timeout=10)
            except ExecboxError:
                pass  # the server (or the kernel) is gone already
            self.kernel_id = None
