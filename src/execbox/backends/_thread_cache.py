"""Threads kept for the block loops that ``arun`` and ``astream`` drive
from an event loop: a run goes to an idle thread at once, else to a new
one (never waits behind another run: a run may last minutes); a thread idle
for ``IDLE_S`` ends.

Why not a thread per run: ``Thread.start`` blocks its caller until the new
thread has run, and under load the new thread first waits for the GIL
(up to the interpreter's switch interval behind each busy thread), so every
run stalled the event loop that started it, and every request behind it.
Handing a run to a waiting thread is a queue put.

After a fork the child has none of the parent's threads: its cache starts
empty (``os.register_at_fork``)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable

__all__ = ["IDLE_S", "run_in_thread"]

IDLE_S = 30.0

_lock = threading.Lock()
_idle: list[queue.SimpleQueue[Callable[[], None]]] = []  # each waited on by one idle thread


def run_in_thread(job: Callable[[], None]) -> None:
    """Run ``job`` (which handles its own exceptions) in a thread of its own."""
    with _lock:
        inbox = _idle.pop() if _idle else None
    if inbox is not None:
        inbox.put(job)
        return
    inbox = queue.SimpleQueue()
    inbox.put(job)
    threading.Thread(target=_serve, args=(inbox,), name="execbox-run", daemon=True).start()


def _serve(inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
    while True:
        try:
            job = inbox.get(timeout=IDLE_S)
        except queue.Empty:
            with _lock:
                if inbox in _idle:
                    _idle.remove(inbox)
                    return
            job = inbox.get()  # taken from the idle list as the wait ran out: its job is on the way
        try:
            job()
        except BaseException:  # noqa: BLE001 - the job reports its own; the thread stays usable
            pass
        del job
        with _lock:
            _idle.append(inbox)


def _forget() -> None:
    global _lock
    _lock = threading.Lock()
    _idle.clear()


os.register_at_fork(after_in_child=_forget)
