"""Executors for stateless runs (``/v1/run``, ``/v1/batch``): checked out
one per request, each request in a workspace of its own.

Making an executor per request costs the sandbox its whole start: measured
here (2 cores, root, median of 5) a new ``SandboxExecutor`` took 109 ms to
start, 23 ms for its first ``print(1)`` and 20 ms to close, against 5 ms
for a run on a started one. So where a block starts from nothing but the
workspace (the sandbox: each block in a box emptied after the block before
it, its processes killed, its /tmp and /dev/shm wiped; local: a subprocess,
no isolation to keep), a finished request's
executor is kept: its workspace emptied (user files and execbox's code
files), and handed to the next request with the same backend and limits.
Stateful backends (a Jupyter kernel keeps variables) and the Docker
container (its /tmp outlives a block) get a new executor per request,
closed after it.

Through the server (sandbox, ``print(1)``, 30 sequential ``/v1/run``
after 3 to warm up, median): 6.6 ms with kept executors, 158 ms with a new
executor per request.

Kept executors are bounded: ``max_idle`` in all, the oldest closed first.
A sandbox executor made here keeps one box (``pool_size=1``): a request's
blocks run one after another, and an executor makes more boxes only while
callers wait for one (64 clients were 64 executors of four boxes each).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections import OrderedDict
from collections.abc import Callable, Hashable

from .._models import Limits
from .._workspace import INTERNAL_DIR
from ..backends import Executor, create_executor
from ..backends._block_run import CODE_DIR
from ..backends._build import BUILD_DIR

__all__ = ["REUSED_BACKENDS", "ExecutorPool"]

# Backends whose blocks leave nothing behind but the workspace (see above).
REUSED_BACKENDS = frozenset({"local", "sandbox", "ray"})  # ray: a sandbox (or local) one on the nodes


class ExecutorPool:
    """Started executors for stateless runs, by (backend, limits, gpus)."""

    def __init__(self, *, max_idle: int, make: Callable[..., Executor] = create_executor) -> None:
        self.max_idle = max_idle
        self._make = make
        self._idle: OrderedDict[int, tuple[Hashable, Executor]] = OrderedDict()
        self._busy: dict[int, Executor] = {}  # checked out, for ``executors`` (/v1/info's pools)
        self._closed = False

    @staticmethod
    def _key(backend: str, limits: Limits, gpus: tuple[str, ...] | None = None) -> Hashable:
        return backend, limits, gpus

    async def acquire(self, backend: str, limits: Limits, gpus: tuple[str, ...] | None = None) -> Executor:
        """A started executor of ``backend`` with ``limits`` (and ``gpus``) and an empty workspace."""
        key = self._key(backend, limits, gpus)
        for ident, (held, executor) in list(self._idle.items()):
            if held == key:
                del self._idle[ident]
                self._busy[ident] = executor
                return executor
        options: dict[str, object] = {"gpus": gpus} if gpus is not None else {}
        if backend == "sandbox":  # a request runs its blocks one by one: one box, more made on demand
            options["pool_size"] = 1
        executor = self._make(backend, limits=limits, keep_code_files=False, **options)
        try:
            await asyncio.to_thread(executor.start)
        except BaseException:
            await asyncio.to_thread(executor.close)
            raise
        self._busy[id(executor)] = executor
        return executor

    async def release(self, executor: Executor, *, reusable: bool = True) -> None:
        """Give back an executor ``acquire`` handed out (``reusable=False``:
        it was interrupted; it is closed)."""
        self._busy.pop(id(executor), None)
        if (
            self._closed
            or not reusable
            or executor.name not in REUSED_BACKENDS
            or not (_already_empty(executor) or await asyncio.to_thread(_emptied, executor))
        ):
            await executor.aclose()
            return
        key = self._key(executor.name, executor.limits, getattr(executor, "gpus", None))
        self._idle[id(executor)] = (key, executor)
        while len(self._idle) > self.max_idle:
            _, (_, oldest) = self._idle.popitem(last=False)
            await oldest.aclose()

    @property
    def idle(self) -> int:
        return len(self._idle)

    def executors(self) -> list[tuple[str, Executor]]:
        """Every executor held: ("idle", kept) and ("running", checked out)."""
        return [("idle", executor) for _, executor in list(self._idle.values())] + [
            ("running", executor) for executor in list(self._busy.values())
        ]

    async def aclose(self) -> None:
        self._closed = True
        idle = [executor for _, executor in self._idle.values()]
        self._idle.clear()
        await asyncio.gather(*(executor.aclose() for executor in idle), return_exceptions=True)


def _already_empty(executor: Executor) -> bool:
    """True when the workspace holds nothing but execbox's folder, without
    its code files (most runs: a block that wrote nothing): read on the
    event loop, with a bound (one directory entry past execbox's is
    enough to say no), to spare the hop to a thread that emptying takes."""
    root = executor.workspace.path
    try:
        with os.scandir(root) as entries:
            if any(entry.name != INTERNAL_DIR for entry in entries):
                return False
        return not (os.path.lexists(root / CODE_DIR) or os.path.lexists(root / BUILD_DIR))
    except OSError:
        return False


def _emptied(executor: Executor) -> bool:
    """Empty the workspace but for execbox's folder (whose code files and builds go):
    True when nothing is left. ``rmtree`` works from descriptors and never
    follows a link a block left."""
    root = executor.workspace.path
    try:
        for entry in os.scandir(root):
            if entry.name == INTERNAL_DIR:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
        for ours in (CODE_DIR, BUILD_DIR):  # a build is never another request's (a tenant's)
            folder = root / ours
            if folder.is_dir() and not folder.is_symlink():
                shutil.rmtree(folder)
        return [e.name for e in os.scandir(root)] in ([], [INTERNAL_DIR])
    except OSError:
        return False
