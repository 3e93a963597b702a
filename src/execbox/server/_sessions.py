"""Sessions: an executor kept between requests (a Jupyter kernel keeps its
state, a sandbox its workspace) until it is deleted or expires.

Each session has a hard ``ttl_s`` (from its creation) and an ``idle_ttl_s``
(from its last use: an execution's end, a file, keepalive, reset). The
reaper closes what expired; an id that ended answers 410 with why
(``ttl``, ``idle``, ``deleted``), an id never seen 404. Ended ids are
remembered (the last ``REMEMBERED``) for that answer.

A session belongs to whoever holds its key (``new_key``, answered once by
``POST /v1/sessions``), not to whoever knows its id: ids are not secrets
(they are in ``Location`` headers, logs, ``/v1/info``). Every request on a
session carries the key in ``X-Execbox-Session-Key`` (``KEY_HEADER``);
the store keeps only its SHA-256 and compares in constant time. A missing
or wrong key is 403 naming the header, for an open or an ended session
alike (404 would hide nothing: ids are 96 random bits, known only to whom
they were shown, and a 403 tells the caller what to fix).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import math
import secrets
import time
from collections import OrderedDict
from datetime import UTC, datetime
from typing import Any

from .._models import Limits
from ..backends import Executor
from ._board import Board
from ._errors import ApiError
from ._executions import Execution
from ._kept import Keeper
from ._load import busy

__all__ = ["KEY_HEADER", "Session", "SessionStore", "new_key"]

REMEMBERED = 10_000
KEY_HEADER = "X-Execbox-Session-Key"


def new_key() -> str:
    """A session's secret: 256 random bits, URL-safe."""
    return "sk_" + secrets.token_urlsafe(32)


def key_digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _check_key(sid: str, digest: bytes, given: str | None) -> None:
    """403 unless ``given`` is the session's key (compared in constant time)."""
    if given is None:
        raise ApiError(
            403,
            "session_key_required",
            f'session {sid} needs its key: send it as the header {KEY_HEADER} (the "key" that '
            "POST /v1/sessions answered once)",
        )
    if not hmac.compare_digest(key_digest(given), digest):
        raise ApiError(
            403,
            "session_key_required",
            f'the {KEY_HEADER} sent is not the key of session {sid}: send the "key" that '
            "POST /v1/sessions answered when it was made",
        )


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def session_id(worker: int) -> str:
    """A new session's id: ``s_``, the worker process that owns it (two hex
    digits), 22 random ones."""
    return f"s_{worker:02x}{secrets.token_hex(11)}"


def owner_of(sid: str) -> int | None:
    """The worker that made session ``sid`` (None: not an id this server makes)."""
    if len(sid) != 26 or not sid.startswith("s_"):
        return None
    try:
        return int(sid[2:4], 16)
    except ValueError:
        return None


class Session:
    def __init__(
        self,
        executor: Executor,
        *,
        key: str,
        backend: str,
        limits: Limits,
        ttl_s: float,
        idle_ttl_s: float,
        worker: int = 0,
        keeper: Keeper,
    ) -> None:
        self.id = session_id(worker)
        self.key_digest = key_digest(key)
        self.executor = executor
        self.backend = backend
        self.limits = limits
        self.ttl_s = ttl_s
        self.idle_ttl_s = idle_ttl_s
        self.created = time.time()
        self.last_used = self.created
        self.executions: OrderedDict[str, Execution] = OrderedDict()  # kept, in the order they started
        self.running: Execution | None = None
        self.keeper = keeper  # the process's: what finished executions hold, within its budgets
        self.kept_bytes = 0  # what this session's finished executions hold (see _kept)
        self.ended = False  # set once it ended (its executions no longer charged)

    @property
    def expires_at(self) -> float:
        return self.created + self.ttl_s

    @property
    def idle_expires_at(self) -> float:
        return self.last_used + self.idle_ttl_s

    def touch(self) -> None:
        self.last_used = time.time()

    def expired(self, now: float) -> str | None:
        if now >= self.expires_at:
            return "ttl"
        if self.running is None and now >= self.idle_expires_at:
            return "idle"
        return None

    def add(self, execution: Execution) -> None:
        self.keeper.started(self, execution)

    def kept(self, execution: Execution) -> None:
        """``execution`` ended: what it holds charged to the budgets."""
        self.keeper.finished(self, execution, execution.kept_bytes)

    def execution(self, eid: str) -> Execution:
        """A kept execution; 410 once it was dropped (``_kept``), 404 for one never made here."""
        found = self.executions.get(eid)
        if found is None:
            raise self.keeper.gone(self.id, eid)
        return found

    def info(self, state: str = "open") -> dict[str, Any]:
        capabilities = self.executor.capabilities
        return {
            "id": self.id,
            "state": state,
            "backend": self.backend,
            "stateful": capabilities.stateful,
            "created_at": iso(self.created),
            "expires_at": iso(self.expires_at),
            "idle_expires_at": iso(self.idle_expires_at),
            "ttl_s": self.ttl_s,
            "idle_ttl_s": self.idle_ttl_s,
            "limits": {name: getattr(self.limits, name) for name in Limits.__dataclass_fields__},
            "running_execution": self.running.id if self.running is not None else None,
            "executions": list(self.executions),
        }


class SessionStore:
    """The open sessions, the ended ones' reasons, and the reaper."""

    def __init__(
        self, max_sessions: int, board: Board | None = None, me: int = 0, keeper: Keeper | None = None
    ) -> None:
        self.max_sessions = max_sessions
        self.keeper = keeper or Keeper()  # what this process keeps of finished executions
        self.board = board or Board(1)  # the server's count of sessions, over its workers
        self.me = me
        self._open: dict[str, Session] = {}
        self._ended: OrderedDict[str, tuple[str, bytes]] = OrderedDict()  # id: (reason, key digest)
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._open)

    def total(self) -> int:
        """The server's sessions, open or being made, over its workers."""
        return self.board.sessions()

    def open_sessions(self) -> list[Session]:
        return list(self._open.values())

    def reserve(self) -> None:
        """Count a session being made, or raise the 429."""
        if not self.board.reserve_session(self.me, self.max_sessions):
            soonest = min((s.expires_at for s in self._open.values()), default=time.time() + 1)
            wait = min(60, math.ceil(soonest - time.time()))
            raise busy(
                f"{self.max_sessions} sessions are open, the most this server keeps "
                f"(execbox serve --max-sessions): delete one, or retry later",
                wait,
            )

    def add(self, session: Session | None) -> None:
        """End a ``reserve``: with the session made, or None when it failed."""
        if session is not None:
            self._open[session.id] = session
        else:
            self.board.drop_session(self.me)

    def get(self, sid: str, key: str | None) -> Session:
        """The open session ``sid`` for a request that sent ``key``: 403
        without its key, 404 for an id never made here, 410 once it ended."""
        session = self._open.get(sid)
        if session is not None:
            _check_key(sid, session.key_digest, key)
        elif sid in self._ended:
            _check_key(sid, self._ended[sid][1], key)
        else:
            raise ApiError(404, "not_found", f"no session {sid!r} (never created here)")
        return self.still_open(sid)

    def still_open(self, sid: str) -> Session:
        """The session ``sid`` (its key already checked), or 410 once it ended."""
        session = self._open.get(sid)
        if session is not None:
            reason = session.expired(time.time())
            if reason is None:
                return session
            self._end(session, reason)
        if sid not in self._ended:
            raise ApiError(404, "not_found", f"no session {sid!r} (never created here)")
        reason = self._ended[sid][0]
        why = {
            "ttl": "its ttl_s passed",
            "idle": "it was idle longer than its idle_ttl_s",
            "deleted": "it was deleted",
            "node_lost": "the Ray node it was pinned to was lost (its files and "
            "state with it): open a new session",
        }[reason]
        raise ApiError(410, "session_expired", f"session {sid} has ended: {why}", reason=reason)

    async def end(self, session: Session, reason: str) -> None:
        """Close a session: cancel what runs, close its executor."""
        task = self._end(session, reason)
        if task is not None:
            await asyncio.shield(task)

    def _end(self, session: Session, reason: str) -> asyncio.Task[None] | None:
        """Mark a session ended and start closing it (a get() that finds it
        expired answers at once; the close goes on behind)."""
        if self._open.pop(session.id, None) is None:
            return None
        self.board.drop_session(self.me)
        self.keeper.forget(session)
        self._ended[session.id] = (reason, session.key_digest)
        while len(self._ended) > REMEMBERED:
            self._ended.popitem(last=False)
        task = asyncio.get_running_loop().create_task(_close(session))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
        return task

    def end_soon(self, session: Session, reason: str) -> None:
        """End a session from a callback: its close goes on behind."""
        self._end(session, reason)

    async def reap_forever(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            now = time.time()
            for session in list(self._open.values()):
                reason = session.expired(now)
                if reason is not None:
                    self._end(session, reason)

    async def aclose(self) -> None:
        """Close every session (at shutdown) and wait for every close."""
        for session in list(self._open.values()):
            self._end(session, "deleted")
        await asyncio.gather(*self._closing, return_exceptions=True)


async def _close(session: Session) -> None:
    if session.running is not None:
        await session.running.cancel()
    await session.executor.aclose()
