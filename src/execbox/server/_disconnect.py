"""Work a request does for as long as its client waits for the answer.

A route that answers at the end (not a stream) is not cancelled when its
client goes away: Starlette runs it to the end and drops the answer. For
work that holds a slot of the server's concurrency for long (a judge of up
to ``MAX_CASES`` cases of up to ``timeout_s`` each), ``unless_gone`` runs
it beside a watch on the request's ``http.disconnect`` and cancels it when
that comes (security issue 39: a judge kept its slot for all its cases
after its client left; ``/v1/run`` and ``/run_code`` ran their block to its
end). Cancelling is what the work's own cancellation
does (``Executor.ajudge``: the case that runs is killed, the rest never
run); its ``finally`` blocks release what it held.
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
    awaited, and a 499 ``client_closed`` raised (no one reads it). The
    request's body must have been read: what ``receive`` says next is the
    disconnect."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:  # also when this handler is cancelled itself (the server stops)
        watch.cancel()
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
    if task.cancelled():
        raise ApiError(499, "client_closed", "the client closed its connection: the work was cancelled")
    return task.result()


async def _disconnected(request: Request) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
