"""What one server process keeps of finished executions, within a byte budget.

A session keeps its executions (the last ``KEPT_EXECUTIONS``) so that a
dropped stream can be resumed and a result read again. Each kept one holds
up to a few times its cap (``_replay``: its events and result, held once),
and they add up over executions and sessions (security issue 39: 20
floods under a 1 MiB cap grew the server by 230 MiB). So what finished
executions hold, as ``_replay.footprint`` counts it, is bounded twice:

- per session, ``ServerConfig.session_kept_bytes`` (``--session-kept-mb``):
  past it, the session's oldest finished executions are dropped, never its
  latest one (a client resuming the stream of the run it just made finds it);
- per server process (each worker), ``ServerConfig.kept_bytes``
  (``--kept-mb``): past it, the oldest finished executions of any session
  are dropped, the latest ones too.

An execution that runs is never dropped (its events are bounded by its
cap); a stream that reads one that was dropped goes on to its end (the
stream holds it). An execution dropped and asked for later answers 410
``execution_gone`` with the ``reason`` (``session_kept_bytes``,
``kept_bytes``, ``kept_count``) and the option to raise. Ids dropped are
remembered (the last ``REMEMBERED``) for that answer; past them, 404.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Protocol

from .._models import MiB
from ._config import KEPT_BYTES, SESSION_KEPT_BYTES
from ._errors import ApiError
from ._executions import Execution

__all__ = ["KEPT_EXECUTIONS", "Keeper", "Keeping"]

KEPT_EXECUTIONS = 16  # per session, for replay
REMEMBERED = 10_000


class Keeping(Protocol):
    """What the keeper asks of a session: its id, its executions by id (in
    the order they started), the one that runs, the bytes its finished ones
    hold, and whether it ended (``forget``)."""

    id: str
    executions: OrderedDict[str, Execution]
    running: Execution | None
    kept_bytes: int
    ended: bool


class Keeper:
    """The finished executions of one process's sessions, oldest first, and their bytes."""

    def __init__(self, session_bytes: int = SESSION_KEPT_BYTES, total_bytes: int = KEPT_BYTES) -> None:
        self.session_bytes = session_bytes
        self.total_bytes = total_bytes
        self.held = 0  # bytes the finished executions kept hold, over every session
        self._order: OrderedDict[str, tuple[Keeping, int]] = OrderedDict()  # eid: (session, bytes)
        self._gone: OrderedDict[str, tuple[str, str]] = OrderedDict()  # eid: (session id, reason)

    def started(self, session: Keeping, execution: Execution) -> None:
        """A session's new execution: kept (its oldest dropped past ``KEPT_EXECUTIONS``)."""
        session.executions[execution.id] = execution
        while len(session.executions) > KEPT_EXECUTIONS:
            oldest = next(iter(session.executions))
            if session.executions[oldest] is session.running:
                break
            self._drop(session, oldest, "kept_count")

    def finished(self, session: Keeping, execution: Execution, size: int) -> None:
        """A session's execution ended holding ``size`` bytes: charged, and the
        oldest dropped past the budgets."""
        latest = execution.id
        if session.ended or session.executions.get(latest) is not execution:
            return  # its session ended, or it was dropped while it ran (the session's count)
        self._order[latest] = (session, size)
        session.kept_bytes += size
        self.held += size
        for eid in list(session.executions):
            if session.kept_bytes <= self.session_bytes or eid == latest:
                break
            if eid in self._order:
                self._drop(session, eid, "session_kept_bytes")
        while self.held > self.total_bytes and self._order:
            eid, (owner, _) = next(iter(self._order.items()))
            self._drop(owner, eid, "kept_bytes")

    def forget(self, session: Keeping) -> None:
        """A session ended: what its executions held is free."""
        for eid in list(session.executions):
            found = self._order.pop(eid, None)
            if found is not None:
                self.held -= found[1]
        session.kept_bytes = 0
        session.ended = True

    def _drop(self, session: Keeping, eid: str, reason: str) -> None:
        session.executions.pop(eid, None)
        found = self._order.pop(eid, None)
        if found is not None:
            session.kept_bytes -= found[1]
            self.held -= found[1]
        self._gone[eid] = (session.id, reason)
        while len(self._gone) > REMEMBERED:
            self._gone.popitem(last=False)

    def gone(self, sid: str, eid: str) -> ApiError:
        """The answer for execution ``eid`` of session ``sid``, not kept: 410
        with why, when it was dropped; else 404."""
        found = self._gone.get(eid)
        if found is None or found[0] != sid:
            return ApiError(
                404,
                "not_found",
                f"no execution {eid!r} in session {sid} (never made there, or dropped long ago)",
            )
        reason = found[1]
        why = {
            "kept_count": f"a session keeps its last {KEPT_EXECUTIONS} executions",
            "session_kept_bytes": "a session keeps what its finished executions hold (results and "
            f"events) up to {self.session_bytes / MiB:g} MiB, its latest always: raise it with "
            "execbox serve --session-kept-mb",
            "kept_bytes": "a server process keeps what finished executions hold (results and events) "
            f"up to {self.total_bytes / MiB:g} MiB over all its sessions: raise it with execbox "
            "serve --kept-mb",
        }[reason]
        return ApiError(
            410,
            "execution_gone",
            f"execution {eid} of session {sid} is no longer kept, the oldest first: {why}",
            reason=reason,
        )
