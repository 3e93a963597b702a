"""Sessions: an executor kept between requests (a Jupyter kernel keeps its
state, a sandbox its workspace) until it is deleted or expires.

Each session has a hard ``ttl_s`` (from its creation) and an ``idle_ttl_s``
(from its last use: an execution's end, a file, keepalive, reset). The
reaper closes what expired; an id that ended answers 410 with why
(``ttl``, ``idle``, ``deleted``), an id never seen 404. Ended ids are
remembered (the last ``REMEMBERED``) for that answer.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any

from .._models import Limits
from ..backends import Executor
from ._errors import ApiError
from ._executions import Execution
from ._load import busy

__all__ = ["Session", "SessionStore"]

REMEMBERED = 10_000
KEPT_EXECUTIONS = 16  # per session, for replay


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Session:
    def __init__(self, executor: Executor, *, backend: str, limits: Limits, ttl_s: float, idle_ttl_s: float) -> None:
        self.id = "s_" + secrets.token_hex(12)
        self.executor = executor
        self.backend = backend
        self.limits = limits
        self.ttl_s = ttl_s
        self.idle_ttl_s = idle_ttl_s
        self.created = time.time()
        self.last_used = self.created
        self.executions: OrderedDict[str, Execution] = OrderedDict()
        self.running: Execution | None = None

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
        self.executions[execution.id] = execution
        while len(self.executions) > KEPT_EXECUTIONS:
            oldest = next(iter(self.executions))
            if self.executions[oldest] is self.running:
                break
            del self.executions[oldest]

    def execution(self, eid: str) -> Execution:
        found = self.executions.get(eid)
        if found is None:
            raise ApiError(404, "not_found", f"no execution {eid!r} in session {self.id} (the last "
                                             f"{KEPT_EXECUTIONS} are kept)")
        return found

    def info(self, state: str = "open") -> dict[str, Any]:
        capabilities = self.executor.capabilities
        return {"id": self.id, "state": state, "backend": self.backend, "stateful": capabilities.stateful,
                "created_at": iso(self.created), "expires_at": iso(self.expires_at),
                "idle_expires_at": iso(self.idle_expires_at), "ttl_s": self.ttl_s, "idle_ttl_s": self.idle_ttl_s,
                "limits": {name: getattr(self.limits, name) for name in Limits.__dataclass_fields__},
                "running_execution": self.running.id if self.running is not None else None,
                "executions": list(self.executions)}


class SessionStore:
    """The open sessions, the ended ones' reasons, and the reaper."""

    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._open: dict[str, Session] = {}
        self._ended: OrderedDict[str, str] = OrderedDict()
        self._reserved = 0
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._open)

    def open_sessions(self) -> list[Session]:
        return list(self._open.values())

    def reserve(self) -> None:
        """Count a session being made, or raise the 429."""
        if len(self._open) + self._reserved >= self.max_sessions:
            soonest = min((s.expires_at for s in self._open.values()), default=time.time() + 1)
            wait = min(60, math.ceil(soonest - time.time()))
            raise busy(f"{self.max_sessions} sessions are open, the most this server keeps "
                       f"(execbox serve --max-sessions): delete one, or retry later", wait)
        self._reserved += 1

    def add(self, session: Session | None) -> None:
        """End a ``reserve``: with the session made, or None when it failed."""
        self._reserved -= 1
        if session is not None:
            self._open[session.id] = session

    def get(self, sid: str) -> Session:
        session = self._open.get(sid)
        if session is not None:
            reason = session.expired(time.time())
            if reason is None:
                return session
            self._end(session, reason)
        reason = self._ended.get(sid)
        if reason is None:
            raise ApiError(404, "not_found", f"no session {sid!r} (never created here)")
        why = {"ttl": "its ttl_s passed", "idle": "it was idle longer than its idle_ttl_s",
               "deleted": "it was deleted", "node_lost": "the Ray node it was pinned to was lost (its files and "
               "state with it): open a new session"}[reason]
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
        self._ended[session.id] = reason
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
