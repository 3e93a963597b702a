"""What the routes share: the config, the stateless executors, the load,
the sessions, what each backend can do (asked once, lazily), and the warm
pools of the executors held (``pools``)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request

from .._errors import ExecboxError
from ..backends import get_backend
from ._config import ServerConfig
from ._executors import ExecutorPool
from ._kept import Keeper
from ._load import Load
from ._sessions import SessionStore
from ._worker import Worker

__all__ = ["ServerState", "state_of"]


class ServerState:
    def __init__(self, config: ServerConfig, worker: Worker | None = None) -> None:
        self.config = config
        self.worker = worker or Worker()
        board, me = self.worker.board, self.worker.index
        # each worker may get the whole concurrency at once (connections land unevenly): keeping
        # fewer made the 16-core server start and close an executor per run (see docs/scale.md)
        self.pool = ExecutorPool(max_idle=config.max_concurrency, make=config.make_executor)
        self.load = Load(config.max_concurrency, config.max_queued or 0, config.max_queue_wait_s, board, me)
        self.sessions = SessionStore(
            config.max_sessions, board, me, Keeper(config.session_kept_bytes, config.kept_bytes)
        )
        self._backends: dict[str, Any] | None = None

    async def backends(self) -> dict[str, Any]:
        """Per served backend: available, and its capabilities (an executor
        made, never started, then closed)."""
        if self._backends is None:
            self._backends = {name: await asyncio.to_thread(_describe, name) for name in self.config.backends}
        return self._backends

    async def pools(self) -> list[dict[str, Any]]:
        """Per executor held (kept idle, running a stateless run, a
        session's) that has a warm pool: its ``pool_health`` (read in a
        thread: the pool's lock may be held by a block starting)."""
        held: list[tuple[str, Any, str | None]] = [
            (use, executor, None) for use, executor in self.pool.executors()
        ]
        held += [("session", session.executor, session.id) for session in self.sessions.open_sessions()]
        return await asyncio.to_thread(_pool_health, held)

    async def aclose(self) -> None:
        await self.worker.aclose()
        await self.sessions.aclose()
        await self.pool.aclose()


def _describe(name: str) -> dict[str, Any]:
    try:
        executor = get_backend(name)()
    except (ExecboxError, ImportError, OSError) as exc:
        return {"available": False, "problem": str(exc)}
    try:
        caps = executor.capabilities
        return {
            "available": True,
            "isolated": caps.isolated,
            "stateful": caps.stateful,
            "languages": list(caps.languages),
            "enforced": sorted(caps.enforced),
        }
    except (ExecboxError, ImportError, OSError) as exc:
        return {"available": False, "problem": str(exc)}
    finally:
        executor.close()


def _pool_health(held: list[tuple[str, Any, str | None]]) -> list[dict[str, Any]]:
    found = []
    for use, executor, sid in held:
        try:
            health = getattr(executor, "pool_health", None)
        except Exception as exc:  # noqa: BLE001 - said in the entry, never a failed /v1/info
            health = {"error": f"{type(exc).__name__}: {exc}"}
        if health is not None:
            found.append(
                {
                    "backend": executor.name,
                    "use": use,
                    **({"session_id": sid} if sid else {}),
                    "health": dict(health),
                }
            )
    return found


def state_of(request: Request) -> ServerState:
    return request.app.state.execbox
