"""A pooled block's unit as the host watches it: the status socket on
which the unit reports ``exit N`` (or the code process says ``started``
before any of the block runs), and the kill that ends it."""

from __future__ import annotations

import re
import socket

from ...jail import BlockGroup

__all__ = ["KILLED", "Unit", "exit_status"]

KILLED = 137  # the unit died without reporting: killed (by us, or by the kernel)


def exit_status(message: bytes) -> int | None:
    """The code in an ``exit N`` report, or None for anything else: the
    block can write on the status socket (its Python runs in the process
    that holds it), so a forged line must not make the host raise."""
    match = re.fullmatch(rb"exit (\d{1,3})", message)
    return int(match.group(1)) if match and int(match.group(1)) <= 255 else None


class Unit:
    """A block running in a unit, as ``watch`` sees it."""

    def __init__(self, status: socket.socket, cgroup: BlockGroup | None) -> None:
        self.status = status
        self.cgroup = cgroup
        self.exit_fd: int | None = status.fileno()
        self.code: int | None = None
        self.started = False  # the code process said it has the block, before running any of it

    def exited(self) -> bool:
        try:
            message = self.status.recv(64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except OSError:
            message = b""
        if message == b"started" and not self.started:
            self.started = True
            return False
        self.code = exit_status(message)
        return True

    def kill(self) -> None:
        if self.code is not None:
            return  # it reported its exit; leaving, it takes its namespace down with it
        try:
            self.status.send(b"kill", socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
        except OSError:
            pass  # the unit is gone, and its namespace with it
        if self.cgroup is not None:
            self.cgroup.kill()
