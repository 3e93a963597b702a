"""Bounded capture of a process's output.

Keeps the head and the tail of each stream and of the interleaved whole, so
that a 1 GB print costs the host a few MiB at most, and the end of the output
(where a traceback usually is) survives the cut.
"""

from __future__ import annotations

__all__ = ["Capture", "StreamBuffer"]

TAIL_SHARE = 4  # a quarter of the allowance keeps the tail


class StreamBuffer:
    """Head + tail of a byte stream, at most ``limit`` bytes held."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._tail_limit = limit // TAIL_SHARE
        self._head_limit = limit - self._tail_limit
        self._head = bytearray()
        self._tail = bytearray()
        self.total = 0

    def feed(self, data: bytes) -> None:
        self.total += len(data)
        room = self._head_limit - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._tail_limit:  # trim in batches, not per chunk
                del self._tail[: len(self._tail) - self._tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.limit

    def text(self, setting: str = "Limits.max_output_bytes") -> str:
        head = self._head.decode("utf-8", errors="replace")
        if not self.truncated:
            return head + self._tail.decode("utf-8", errors="replace")
        tail = bytes(self._tail[-self._tail_limit :]) if self._tail_limit else b""
        dropped = self.total - len(self._head) - len(tail)
        marker = (
            f"\n[... {dropped} bytes of output dropped: the block printed {self.total} bytes, "
            f"more than {setting}={self.limit} ...]\n"
        )
        return head + marker + tail.decode("utf-8", errors="replace")


class Capture:
    """stdout, stderr and their interleaving in arrival order."""

    def __init__(self, limit: int) -> None:
        self.stdout = StreamBuffer(limit)
        self.stderr = StreamBuffer(limit)
        self.combined = StreamBuffer(limit)

    def feed(self, stream: str, data: bytes) -> None:
        (self.stdout if stream == "stdout" else self.stderr).feed(data)
        self.combined.feed(data)

    @property
    def truncated(self) -> bool:
        return self.combined.truncated
