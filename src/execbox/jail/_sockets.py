"""Messages between the host and a jail's processes over AF_UNIX
SOCK_SEQPACKET sockets, never blocking without a deadline.

Not ``socket.send_fds`` / ``socket.recv_fds`` with ``MSG_DONTWAIT``:
before Python 3.13 both drop their flags and wait, so a peer in the jail
that stops reading (or never answers) would hold the host's thread
forever. A wait past its deadline raises ``StallError`` naming what it
waited for.
"""

from __future__ import annotations

import array
import os
import select
import socket
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from .._errors import StallError

__all__ = ["receive_within", "recv_fds_now", "send_fds_now", "send_within"]

_NOW = socket.MSG_DONTWAIT | socket.MSG_NOSIGNAL
T = TypeVar("T")


def send_fds_now(sock: socket.socket, data: bytes, fds: Sequence[int] = ()) -> None:
    """One message (with descriptors) if the peer's socket has room;
    BlockingIOError if not, OSError if the peer is gone."""
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    sock.sendmsg([data], ancillary, _NOW)


def recv_fds_now(sock: socket.socket, size: int, max_fds: int) -> tuple[bytes, list[int]]:
    """One message and its descriptors if one is there (BlockingIOError if
    not). More descriptors than ``max_fds`` is a peer we do not know:
    OSError, and none of them kept."""
    fds = array.array("i")
    data, ancillary, flags, _ = sock.recvmsg(
        size, socket.CMSG_LEN(max(max_fds, 1) * fds.itemsize), socket.MSG_DONTWAIT | socket.MSG_CMSG_CLOEXEC
    )
    for level, kind, payload in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    received = list(fds)
    if flags & socket.MSG_CTRUNC or len(received) > max_fds:
        for fd in received:
            os.close(fd)
        raise OSError("a peer in the jail sent more descriptors than its message has")
    return data, received


def send_within(
    sock: socket.socket, data: bytes, fds: Sequence[int], deadline: float, waiting_for: str
) -> None:
    """One message, waiting until ``deadline`` at most for room in the
    peer's socket (StallError past it; OSError if the peer is gone)."""
    _until(
        deadline,
        waiting_for,
        lambda: send_fds_now(sock, data, fds),
        # a full datagram queue may poll writable: look again soon
        lambda left: select.select([], [sock], [], min(left, 0.05)),
    )


def receive_within(
    sock: socket.socket, deadline: float, size: int, max_fds: int, waiting_for: str
) -> tuple[bytes, list[int]]:
    """One message from a peer in the jail: (data, fds); StallError when
    none came by ``deadline``."""
    return _until(
        deadline,
        waiting_for,
        lambda: recv_fds_now(sock, size, max_fds),
        lambda left: select.select([sock], [], [], left),
    )


def _until(deadline: float, waiting_for: str, attempt: Callable[[], T], wait: Callable[[float], object]) -> T:
    """``attempt()`` until it does not raise BlockingIOError, ``wait(left)``
    between tries; StallError once ``deadline`` has passed."""
    begun = time.monotonic()
    while True:
        try:
            return attempt()
        except BlockingIOError:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            raise StallError(
                f"waited {time.monotonic() - begun:.1f} s for {waiting_for} in vain", waiting_for=waiting_for
            )
        wait(left)
