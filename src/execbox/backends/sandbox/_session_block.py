"""A block running in the stateful session (``_session``), as ``watch``
sees it: the answers the session gives on the code socket, each tied to
its request, and the displays handed over with the last.

The block's own code runs in the process that holds the code socket, so
everything read here is the block's to forge. Each request carries a fresh
``nonce`` (``new_nonce``); the session says ``started NONCE`` when the
block's own code begins and ``exit N NONCE`` when it ends (with a sealed
memfd of its displays when it has any); ``full`` and ``nomem`` (bare) say
the session could not take the request, before any code of it began.

Anything else ends the block as forged, and the session with it. An answer
that names another request's nonce (``stale``) means the session is out of
step with its requests: a block answered for itself and ended early, and
its true answer came while the next one waited (security issue 39: later
blocks then got each other's exit codes and displays). That session is
ended too, and the block told so, rather than handed another's result.
The nonce is no secret from the block (they share one interpreter): one
that digs it out can end its own block early, as exiting would; its true
answer, arriving later under that nonce, then ends the session as above.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import select
import socket
import stat
import time
from typing import Any

from ...jail import recv_fds_now

__all__ = ["DISPLAY_SLACK", "SessionBlock", "new_nonce"]

# read past a block's Limits.max_output_bytes of display data: the JSON around it (the session
# charges each display its own overhead against the cap, so an honest answer fits)
DISPLAY_SLACK = 64 << 10
_ANSWER = re.compile(rb"(started|exit (\d{1,3})) ([0-9a-f]{16})")
SEALED = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


def new_nonce() -> str:
    """What ties a request to its answers: 16 hex digits."""
    return secrets.token_hex(8)


class SessionBlock:
    """A block running in the session: over when the session answers on
    the code socket (or closes it: it died). ``kill`` interrupts it
    (SIGINT through the unit's init)."""

    def __init__(self, code: socket.socket, status: socket.socket, nonce: str) -> None:
        self.sock = code
        self.status = status
        self.nonce = nonce.encode()
        self.exit_fd: int | None = code.fileno()
        self.code: int | None = None
        self.answered = self.eof = self.full = self.nomem = False
        self.interrupted_at: float | None = None
        self.display_fd: int | None = None
        self.started = False  # the session said the block's own code began
        self.forged: str | None = None  # what was wrong with an answer a block forged
        self.stale = False  # an answer to another request came: the session is out of step
        self.problem: str | None = None  # what was wrong with the displays it handed over
        self.dropped = 0  # displays the session dropped past the block's cap

    def exited(self) -> bool:
        """Read one answer; True once the block is over. An answer that is
        not one the session gives to this request, or comes out of turn,
        ends the block as forged (and the session with it)."""
        try:
            data, fds = recv_fds_now(self.sock, 64, 4)
        except BlockingIOError:
            return False
        except OSError:
            data, fds = b"", []
        for fd in fds[1:]:
            os.close(fd)
        said = _ANSWER.fullmatch(data)
        mine = said is not None and said[3] == self.nonce
        if mine and said is not None and said[1] == b"started" and not self.started and not fds:
            self.started = True
            return False
        code = int(said[2]) if mine and said is not None and said[2] is not None else None
        self.answered = True
        self.eof = not data
        if data in (b"full", b"nomem") and not self.started:  # said before the block's code began
            self.full, self.nomem = True, data == b"nomem"
        elif said is not None and not mine:
            self.stale = True
            self.forged = "an answer to another block's request came while this one waited"
        elif data and (code is None or code > 255):
            self.forged = f"the session's socket carried {data[:40]!r}, which the session never sends"
        self.code = code if self.forged is None else None
        self.display_fd = fds[0] if fds and self.code is not None else None
        if fds and self.display_fd is None:
            os.close(fds[0])
        return True

    def kill(self) -> None:
        """Interrupt the block: one that has not answered, or whatever runs
        after a forged answer (the session is ended after it)."""
        if (self.answered and self.forged is None) or self.interrupted_at is not None:
            return
        self.interrupted_at = time.monotonic()
        try:
            self.status.send(b"int", socket.MSG_NOSIGNAL | socket.MSG_DONTWAIT)
        except OSError:
            pass  # the unit is gone

    def wait_answer(self, until: float) -> None:
        while not self.answered:
            left = until - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return
            self.exited()

    def read_displays(self, limit: int) -> list[dict[str, Any]]:
        """The block's displays, at most ``limit`` (``Limits.max_output_bytes``)
        and ``DISPLAY_SLACK`` bytes read; how many the session dropped past
        ``limit`` in ``dropped``."""
        if self.display_fd is None:
            return []
        fd, self.display_fd = self.display_fd, None
        try:
            found = json.loads(read_sealed(fd, limit + DISPLAY_SLACK))
        except (OSError, ValueError, RecursionError) as exc:  # from the block's own process: anything
            self.problem = f"the displays handed over were refused: {exc}"[:300]
            return []
        finally:
            os.close(fd)
        if not isinstance(found, list):
            self.problem = "the displays handed over were refused: not a list"
            return []
        for item in found:
            if isinstance(item, dict) and isinstance(item.get("dropped"), int) and item["dropped"] > 0:
                self.dropped += item["dropped"]
        return [d for d in found if isinstance(d, dict) and "dropped" not in d]


def read_sealed(fd: int, limit: int) -> bytes:
    """The whole of a memfd the session sealed, if it is one and holds at
    most ``limit`` bytes: a regular file whose size no one can change, so
    the read neither blocks (a pipe, an eventfd, a socket passed instead)
    nor grows."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise OSError("not a file the session made (a memfd)")
    try:
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
    except OSError:
        raise OSError("not a sealed memfd") from None
    if seals & SEALED != SEALED:
        raise OSError("a memfd that was not sealed")
    if info.st_size > limit:
        raise OSError(f"{info.st_size} bytes, more than the {limit} a block's displays may take")
    return os.pread(fd, info.st_size, 0)
