"""Work a request does for as long as its client waits for the answer.

A route that answers at the end (not a stream) is not cancelled when its
client goes away: Starlette runs it to the end and drops the answer.
``unless_gone`` runs such work beside a watch on the request's
``http.disconnect`` and cancels it when that comes: the routes that run
code (``/v1/run``, ``/run_code``, ``/v1/judge``, and ``/v1/batch`` until
its stream begins, which Starlette then cancels itself) run their whole
admission under it, the wait in the server's line included
(``Load.in_slot``). So a client that leaves while its request waits in
line takes it out of the line there and then: it never takes a slot, never
runs (issue 42: 16 runs abandoned after 1 s kept the 8 slots and the line,
each of the 8 waiting took a slot in its turn, and the next run waited
29 s); one that leaves while its request runs has its work cancelled
(security issue 39: a judge kept its slot for all its cases; ``/v1/run``
and ``/run_code`` ran their block to its end). Cancelling is what the
work's own cancellation does (``Executor.arun`` / ``ajudge``: what runs is
killed, the rest never runs); its ``finally`` blocks release what it held,
the slot last.

The watch starts before the work and cancels it in the very step that sees
the disconnect: a client already gone when the request is read is seen
before the work's first step (it never enters the line), and no step of
the work runs between the disconnect being seen and its cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

from ._errors import ApiError

__all__ = ["unless_gone"]

T = TypeVar("T")


async def unless_gone(request: Request, work: Coroutine[Any, Any, T]) -> T:
    """``work``'s answer; once the client disconnects, ``work`` cancelled,
    awaited (what it held released), and a 499 ``client_closed`` raised
    (no one reads it). The request's body must have been read: what
    ``receive`` says next is the disconnect."""
    started: list[asyncio.Task[T]] = []

    async def watch() -> None:
        await _disconnected(request)
        for task in started:
            task.cancel()

    watcher = asyncio.ensure_future(watch())  # scheduled first: its first step runs before the work's
    task = asyncio.ensure_future(work)
    started.append(task)
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this handler is cancelled itself (the server stops)
        watcher.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        raise ApiError(499, "client_closed", "the client closed its connection: the work was cancelled")
    return task.result()


async def _disconnected(request: Request) -> None:
    """Until the client is gone (a failed ``receive`` says so too)."""
    try:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                return
    except Exception:  # noqa: BLE001 - a connection that cannot be read is one whose client is gone
        return
