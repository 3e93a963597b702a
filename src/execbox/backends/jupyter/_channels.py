"""Talking to a Jupyter kernel, apart from where it runs: the messaging
protocol's channels (shell, iopub, control) behind two calls, ``send`` and
``recv``, so a cell is run the same way over ZMQ (a local or a jailed
kernel) and over a gateway's WebSocket (``_gateway``).

``ZmqChannels`` is a lean client on the calling thread: one poll over the
shell and iopub sockets, messages signed and read with jupyter_client's
``Session``. jupyter_client's blocking client runs an asyncio loop per
message read, which costs more than the kernel's own work for a small cell.
Calls are made under the executor's lock (ZMQ sockets are not thread-safe).
A send waits at most SEND_TIMEOUT_S (a kernel that takes nothing, past
ZMQ's queue, is stopped): then ``ChannelStalled``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from ..._errors import BackendUnavailableError

__all__ = ["SEND_TIMEOUT_S", "ChannelStalled", "Channels", "ZmqChannels", "wait_ready"]

Message = dict[str, Any]
SEND_TIMEOUT_S = 10.0


class ChannelStalled(Exception):
    """A message to the kernel could not be sent within SEND_TIMEOUT_S."""


class Channels(Protocol):
    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        """Send a request; its msg_id."""

    def recv(self, timeout: float) -> tuple[str, Message] | None:
        """The next message from shell or iopub, as (channel, message), or
        None after ``timeout`` seconds."""

    def close(self) -> None: ...


class ZmqChannels:
    """Shell, iopub and control sockets of one kernel (its connection info)."""

    def __init__(self, info: dict[str, Any]) -> None:
        import zmq
        from jupyter_client.session import Session

        key = info["key"]
        self.session = Session(
            key=key.encode() if isinstance(key, str) else key,
            signature_scheme=info.get("signature_scheme", "hmac-sha256"),
        )
        self._zmq = zmq
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        transport, ip = info.get("transport", "tcp"), info["ip"]

        def url(port: int) -> str:
            return f"ipc://{ip}-{port}" if transport == "ipc" else f"tcp://{ip}:{port}"

        def socket(kind: int, port: int) -> Any:
            sock = context.socket(kind)
            sock.linger = 0
            sock.sndtimeo = int(SEND_TIMEOUT_S * 1000)
            if kind == zmq.DEALER:
                sock.setsockopt(zmq.IDENTITY, self.session.bsession)
            sock.connect(url(port))
            return sock

        self._sockets = {
            "shell": socket(zmq.DEALER, info["shell_port"]),
            "control": socket(zmq.DEALER, info["control_port"]),
            "iopub": socket(zmq.SUB, info["iopub_port"]),
        }
        self._sockets["iopub"].setsockopt(zmq.SUBSCRIBE, b"")
        self._poller = zmq.Poller()
        self._names = {}
        for name in ("iopub", "shell"):  # iopub first: a cell's outputs come before its reply
            self._poller.register(self._sockets[name], zmq.POLLIN)
            self._names[self._sockets[name]] = name

    def send(self, channel: str, msg_type: str, content: dict[str, Any]) -> str:
        msg = self.session.msg(msg_type, content)
        try:
            self.session.send(self._sockets[channel], msg)
        except self._zmq.Again:
            raise ChannelStalled(f"the kernel took nothing on {channel} for {SEND_TIMEOUT_S:.0f} s") from None
        return msg["header"]["msg_id"]

    def recv(self, timeout: float) -> tuple[str, Message] | None:
        for sock, _ in self._poller.poll(max(0, int(timeout * 1000))):
            _, msg = self.session.recv(sock, mode=self._zmq.NOBLOCK)
            if msg is not None:
                return self._names[sock], msg
        return None

    def close(self) -> None:
        for sock in self._sockets.values():
            sock.close(linger=0)


def execute(
    channels: Channels, code: str, *, silent: bool = False, user_expressions: dict[str, str] | None = None
) -> str:
    return channels.send(
        "shell",
        "execute_request",
        {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "allow_stdin": False,
            "user_expressions": user_expressions or {},
            "stop_on_error": False,
        },
    )


def wait_ready(
    channels: Channels, alive: Callable[[], bool], timeout: float, describe: Callable[[], str]
) -> None:
    """kernel_info until the kernel answers on shell *and* its status reaches
    us on iopub (a subscription made before the kernel bound its socket
    drops what comes first), then drop what is queued. Fails at once if
    ``alive()`` turns false."""
    end = time.monotonic() + timeout
    replied = heard = False
    asked = 0.0
    while time.monotonic() < end:
        if not alive():
            raise BackendUnavailableError("jupyter", f"the kernel exited while starting: {describe()}")
        if time.monotonic() - asked > 0.2:
            channels.send("shell", "kernel_info_request", {})
            asked = time.monotonic()
        got = channels.recv(0.02)
        if got is None:
            continue
        replied |= got[0] == "shell"
        heard |= got[0] == "iopub"
        if replied and heard:
            while channels.recv(0.05) is not None:
                pass
            return
    raise BackendUnavailableError("jupyter", f"the kernel did not answer in {timeout:.0f} s: {describe()}")
