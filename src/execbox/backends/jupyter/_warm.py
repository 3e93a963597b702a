"""Warm pools: objects that are slow to make (a started kernel) made ahead
of demand, in a background thread, per configuration.

``warm_pool(key, make, size)`` gives the pool for one configuration; its
``take()`` hands over a ready object or None (nothing ready yet: the caller
makes its own, and the pool fills up behind it). What is left at
interpreter exit is discarded.
"""

from __future__ import annotations

import atexit
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["WarmPool", "warm_pool"]

T = TypeVar("T")


class WarmPool(Generic[T]):
    def __init__(self, make: Callable[[], T], discard: Callable[[T], None], size: int) -> None:
        self._make = make
        self._discard = discard
        self.size = size
        self._ready: deque[T] = deque()
        self._lock = threading.Lock()
        self._wanted = threading.Event()
        self._closed = False
        self.failures = 0
        self._thread = threading.Thread(target=self._fill, name="execbox-warm-pool", daemon=True)
        self._thread.start()

    def take(self) -> T | None:
        with self._lock:
            item = self._ready.popleft() if self._ready else None
        self._wanted.set()
        return item

    def _fill(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            while True:
                with self._lock:
                    if self._closed or len(self._ready) >= self.size:
                        break
                try:
                    item = self._make()
                except Exception:  # noqa: BLE001 - the caller's own start will say what is wrong
                    self.failures += 1
                    break
                with self._lock:
                    if self._closed:
                        self._discard(item)
                        return
                    self._ready.append(item)
            if self._closed:
                return

    def close(self) -> None:
        with self._lock:
            self._closed = True
            items = list(self._ready)
            self._ready.clear()
        self._wanted.set()
        for item in items:
            self._discard(item)


_pools: dict[Hashable, WarmPool] = {}
_pools_lock = threading.Lock()


def warm_pool(key: Hashable, make: Callable[[], T], discard: Callable[[T], None], size: int) -> WarmPool[T]:
    with _pools_lock:
        pool = _pools.get(key)
        if pool is None:
            pool = _pools[key] = WarmPool(make, discard, size)
        return pool


@atexit.register
def _close_all() -> None:
    with _pools_lock:
        pools = list(_pools.values())
        _pools.clear()
    for pool in pools:
        pool.close()
