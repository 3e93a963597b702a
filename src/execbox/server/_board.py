"""The counts the worker processes of one server share (``execbox serve
--workers N``), so that ``--max-concurrency``, ``--max-queue`` and
``--max-sessions`` stay the whole server's however many workers answer.

Per worker, in shared memory under one lock: the executions it runs, the
requests waiting in its line, the slots handed to it and not yet taken, the
time its first waiter joined, its sessions (open or being made), the slots
it gave requests in all and the waiters that left its line unserved because
they were cancelled (their client went away: ``_disconnect``); and the
times of the last slot releases (the line's pace, for ``Retry-After``).

A slot freed in one worker goes to the line whose first waiter has waited
longest (first come, first served across workers, to within the time a hand
over takes): at once when that line is the releasing worker's own, else it
is counted as handed to the other worker and a byte on that worker's wake
pipe tells its event loop to take it (``take_handed``). A worker that died
gives its slots back (``reclaim``, by the supervisor).

One worker (``Board(1)``, the default) has no wake pipes and the same rules.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["Board"]

RUNNING, WAITING, HANDED, OLDEST, SESSIONS, ADMITTED, ABANDONED = range(7)
CELLS = 7
# slot releases remembered for the line's pace
PACE_WINDOW = 64


class Board:
    def __init__(self, workers: int = 1) -> None:
        context = multiprocessing.get_context("spawn")
        self.workers = workers
        # one process: a thread lock; a named semaphore would outlive a SIGTERM (uvicorn
        # re-raises it after its shutdown, so no atexit unlinks it: the resource tracker warns)
        self._lock = context.Lock() if workers > 1 else threading.Lock()
        self._cells: Any = context.RawArray("q", CELLS * workers)
        self._freed: Any = context.RawArray("q", PACE_WINDOW + 1)  # times (ns), then the count
        # (read end, write end) per worker; Connections only carry the descriptors to a spawned worker
        self._wakes = [context.Pipe(duplex=False) for _ in range(workers)] if workers > 1 else []
        for ends in self._wakes:  # the flag is the open file's: a spawned worker's copies share it
            for end in ends:
                os.set_blocking(end.fileno(), False)

    @contextlib.contextmanager
    def _held(self) -> Iterator[Any]:
        with self._lock:
            yield self._cells

    def _sum(self, cells: Any, kind: int) -> int:
        return sum(cells[w * CELLS + kind] for w in range(self.workers))

    def _demand(self, cells: Any, w: int) -> int:
        return cells[w * CELLS + WAITING] - cells[w * CELLS + HANDED]

    def _in_line(self, cells: Any) -> int:
        return sum(max(0, self._demand(cells, w)) for w in range(self.workers))

    def _taken(self, cells: Any) -> int:
        """Slots in use: run by a worker, or handed to one and not yet taken."""
        return self._sum(cells, RUNNING) + self._sum(cells, HANDED)

    def _longest_waiting(self, cells: Any) -> int | None:
        """The worker whose line has waited longest (None: no line waits)."""
        waiting = [w for w in range(self.workers) if self._demand(cells, w) > 0]
        return min(waiting, key=lambda w: cells[w * CELLS + OLDEST]) if waiting else None

    # the numbers /v1/info shows

    def running(self) -> int:
        with self._held() as cells:
            return self._taken(cells)

    def in_line(self) -> int:
        with self._held() as cells:
            return self._in_line(cells)

    def admitted(self) -> int:
        """Slots given to requests since the server started (a slot passed
        on by a waiter that was cancelled as it was handed one counts once more)."""
        with self._held() as cells:
            return self._sum(cells, ADMITTED)

    def abandoned(self) -> int:
        """Waiters that left a line unserved because they were cancelled (their client left)."""
        with self._held() as cells:
            return self._sum(cells, ABANDONED)

    def longest_wait_s(self) -> float:
        with self._held() as cells:
            oldest = [cells[w * CELLS + OLDEST] for w in range(self.workers) if self._demand(cells, w) > 0]
        return max(0.0, (time.monotonic_ns() - min(oldest)) / 1e9) if oldest else 0.0

    def pace(self) -> float | None:
        """Slots freed per second over the last ``PACE_WINDOW`` releases."""
        with self._lock:
            count = self._freed[PACE_WINDOW]
            times = sorted(self._freed[i] for i in range(min(count, PACE_WINDOW)))
        if len(times) < 2 or times[-1] <= times[0]:
            return None
        return (len(times) - 1) / ((times[-1] - times[0]) / 1e9)

    def remember_release(self, at_ns: int) -> None:
        """Count a slot freed at ``at_ns`` in the pace (``release`` does)."""
        with self._lock:
            self._remember(at_ns)

    def forget_releases(self) -> None:
        with self._lock:
            self._freed[PACE_WINDOW] = 0

    def _remember(self, at_ns: int) -> None:
        count = self._freed[PACE_WINDOW]
        self._freed[count % PACE_WINDOW] = at_ns
        self._freed[PACE_WINDOW] = count + 1

    # slots

    def take_free(self, me: int, limit: int) -> bool:
        """Take a free slot when one is free and nobody waits for it."""
        with self._held() as cells:
            if self._taken(cells) < limit and not self._in_line(cells):
                cells[me * CELLS + RUNNING] += 1
                cells[me * CELLS + ADMITTED] += 1
                return True
            return False

    def join_line(self, me: int, max_queued: int, oldest_ns: int) -> bool:
        """Count a waiter in ``me``'s line (its first one joined at
        ``oldest_ns``); False when the server's lines hold ``max_queued``."""
        with self._held() as cells:
            if self._in_line(cells) >= max_queued:
                return False
            cells[me * CELLS + WAITING] += 1
            cells[me * CELLS + OLDEST] = oldest_ns
            return True

    def leave_line(self, me: int, oldest_ns: int, *, cancelled: bool = False) -> None:
        """A waiter left ``me``'s line unserved (its wait ran out, or it was
        ``cancelled``: its client went away)."""
        with self._held() as cells:
            cells[me * CELLS + WAITING] -= 1
            cells[me * CELLS + OLDEST] = oldest_ns
            cells[me * CELLS + ABANDONED] += cancelled

    def release(self, me: int) -> int | None:
        """Free one of ``me``'s slots: the worker whose line gets it (``me``:
        serve your first waiter, it is counted out of the line already), or
        None when no line waits."""
        with self._held() as cells:
            self._remember(time.monotonic_ns())
            to = self._longest_waiting(cells)
            if to == me:
                cells[me * CELLS + WAITING] -= 1
                cells[me * CELLS + ADMITTED] += 1
                return me
            cells[me * CELLS + RUNNING] -= 1
            if to is None:
                return None
            cells[to * CELLS + HANDED] += 1
        self._wake(to)
        return to

    def take_handed(self, me: int) -> tuple[int, int]:
        """The slots handed to ``me``: (for its waiters, counted out of the
        line; spare, its waiters having left: ``release`` each)."""
        with self._held() as cells:
            handed = cells[me * CELLS + HANDED]
            served = min(handed, cells[me * CELLS + WAITING])
            cells[me * CELLS + HANDED] = 0
            cells[me * CELLS + WAITING] -= served
            cells[me * CELLS + RUNNING] += handed
            cells[me * CELLS + ADMITTED] += served
            return served, handed - served

    def set_oldest(self, me: int, oldest_ns: int) -> None:
        with self._held() as cells:
            cells[me * CELLS + OLDEST] = oldest_ns

    # sessions

    def reserve_session(self, me: int, limit: int) -> bool:
        with self._held() as cells:
            if self._sum(cells, SESSIONS) >= limit:
                return False
            cells[me * CELLS + SESSIONS] += 1
            return True

    def sessions(self) -> int:
        with self._held() as cells:
            return self._sum(cells, SESSIONS)

    def drop_session(self, me: int) -> None:
        with self._held() as cells:
            cells[me * CELLS + SESSIONS] -= 1

    # the wake pipes and a dead worker

    def wake_fd(self, me: int) -> int | None:
        """The descriptor ``me``'s event loop reads for handed slots (None
        with one worker); non-blocking, as are the write ends."""
        return self._wakes[me][0].fileno() if self._wakes else None

    def _wake(self, to: int) -> None:
        with contextlib.suppress(BlockingIOError):  # full: a wake-up is pending anyway
            os.write(self._wakes[to][1].fileno(), b"!")

    def reclaim(self, dead: int) -> None:
        """Give back what worker ``dead`` held (its slots to the lines, or
        free), before a new worker takes its place."""
        woken = []
        with self._held() as cells:
            freed = cells[dead * CELLS + RUNNING] + cells[dead * CELLS + HANDED]
            for kind in (RUNNING, WAITING, HANDED, OLDEST, SESSIONS):  # its totals stay counted
                cells[dead * CELLS + kind] = 0
            for _ in range(freed):
                to = self._longest_waiting(cells)
                if to is None:
                    break
                cells[to * CELLS + HANDED] += 1
                woken.append(to)
        for to in woken:
            self._wake(to)
