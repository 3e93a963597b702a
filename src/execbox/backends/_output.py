"""Bounded capture of a block's output, held once.

Keeps the head and the tail of the interleaved output (stdout and stderr in
arrival order), each run of one stream's bytes tagged with its stream, so
that a 1 GB print costs the host its cap, and the end of the output (where
a traceback usually is) survives the cut. Views of it, each with ``text()``,
``total``, ``truncated`` and ``limit``:

- ``combined``: the head (three quarters of the allowance) and the tail (the
  last quarter), with a marker between them that says what was dropped;
- ``stdout`` / ``stderr``: that stream's bytes of the same head and tail
  (the marker where its own bytes were dropped). A block that wrote to one
  stream only gets ``combined``'s text, the same string.

What a block printed is held once (security issue 39: three buffers, one per
stream and one interleaved, each let grow to 1.25 times the cap, held a flood
2.5 times over, then three texts again). The texts are made once, when first
asked (the block is over: feeding after that is a mistake), each kept part
decoded and let go in turn, so that the bytes and the text are not both held
whole. Each switch from one stream to the other costs ``PART_COST`` bytes of
the allowance (its bookkeeping): a block that alternates one-byte writes
keeps fewer bytes, not more memory.
"""

from __future__ import annotations

import codecs
from collections import deque
from collections.abc import Iterator

__all__ = ["Capture", "StreamView"]

TAIL_SHARE = 4  # a quarter of the allowance keeps the tail
# a stream's bytes are kept in parts of about this size: over malloc's mmap threshold (the server
# holds it at 128 KiB, server._malloc), so that a part let go is given back, not left in the heap
PART_SIZE = 256 << 10
PART_COST = 128  # what a switch of stream costs the allowance, in bytes
SETTING = "Limits.max_output_bytes"
STREAMS = ("stdout", "stderr")


class _Part:
    """A run of one stream's bytes."""

    __slots__ = ("cost", "data", "stream")

    def __init__(self, stream: str, data: bytes, cost: int) -> None:
        self.stream = stream
        self.data = bytearray(data)
        self.cost = cost


class StreamView:
    """One text of a capture: the interleaved whole (``stream`` None) or one stream's."""

    def __init__(self, capture: Capture, stream: str | None) -> None:
        self._capture = capture
        self._stream = stream
        self.limit = capture.limit

    @property
    def total(self) -> int:
        """The bytes written (kept or not)."""
        cap = self._capture
        return cap.printed if self._stream is None else cap.totals[self._stream]

    @property
    def dropped(self) -> int:
        cap = self._capture
        return sum(cap.dropped.values()) if self._stream is None else cap.dropped[self._stream]

    @property
    def truncated(self) -> bool:
        return self.dropped > 0

    def text(self) -> str:
        return self._capture.texts()[self._stream or "output"]


class Capture:
    """stdout, stderr and their interleaving in arrival order, within ``limit`` bytes."""

    def __init__(self, limit: int, setting: str = SETTING) -> None:
        self.limit = limit
        self.setting = setting  # named in the marker: what to raise
        self._tail_limit = limit // TAIL_SHARE
        self._head_room = limit - self._tail_limit
        self._head: list[_Part] = []
        self._tail: deque[_Part] = deque()
        self._tail_size = 0  # the tail's bytes and costs
        self.totals = dict.fromkeys(STREAMS, 0)
        self.dropped = dict.fromkeys(STREAMS, 0)
        self._texts: dict[str, str] | None = None
        self.combined = StreamView(self, None)
        self.stdout = StreamView(self, "stdout")
        self.stderr = StreamView(self, "stderr")

    @property
    def printed(self) -> int:
        return sum(self.totals.values())

    @property
    def truncated(self) -> bool:
        return self.combined.truncated

    def feed(self, stream: str, data: bytes) -> None:
        if self._texts is not None:
            raise RuntimeError("a capture's text was made: the block is over, it takes no more output")
        stream = "stdout" if stream == "stdout" else "stderr"
        self.totals[stream] += len(data)
        if self._head_room > 0:
            data = self._to_head(stream, data)
        if data:
            self._to_tail(stream, data)

    def _to_head(self, stream: str, data: bytes) -> bytes:
        """What of ``data`` the head keeps; the rest is returned."""
        head = self._head
        if not head or head[-1].stream != stream or len(head[-1].data) >= PART_SIZE:
            cost = PART_COST if head and head[-1].stream != stream else 0
            if self._head_room <= cost:
                self._head_room = 0  # the head is full
                return data
            self._head_room -= cost
            head.append(_Part(stream, b"", cost))
        if len(data) <= self._head_room:
            head[-1].data += data
            self._head_room -= len(data)
            return b""
        head[-1].data += data[: self._head_room]
        data, self._head_room = data[self._head_room :], 0
        return data

    def _to_tail(self, stream: str, data: bytes) -> None:
        if len(data) > self._tail_limit:  # only its end can stay
            cut = len(data) - self._tail_limit
            self.dropped[stream] += cut
            data = data[cut:]
        tail = self._tail
        last = tail[-1] if tail else None
        if last is not None and last.stream == stream and len(last.data) < PART_SIZE:
            last.data += data
        else:
            cost = PART_COST if last is not None and last.stream != stream else 0
            tail.append(_Part(stream, data, cost))
            self._tail_size += cost
        self._tail_size += len(data)
        excess = self._tail_size - self._tail_limit
        while excess > 0 and tail:  # the oldest bytes of the tail are dropped
            first = tail[0]
            if len(first.data) <= excess or len(first.data) + first.cost <= excess:
                tail.popleft()
                cut, freed = len(first.data), len(first.data) + first.cost
            else:
                del first.data[:excess]
                cut = freed = excess
            self.dropped[first.stream] += cut
            self._tail_size -= freed
            excess -= freed

    def texts(self) -> dict[str, str]:
        """``{"output", "stdout", "stderr"}``: the views' texts, made once (the parts let go)."""
        if self._texts is None:
            head, tail = self._head, self._tail
            self._head, self._tail = [], deque()
            head.reverse()
            self._texts = self._views(self._pieces(head, tail))
        return self._texts

    def _pieces(self, head: list[_Part], tail: deque[_Part]) -> Iterator[tuple[str | None, str]]:
        """The kept parts as (stream, text), each part let go once decoded;
        ``(None, "")`` where the middle was dropped. A character split between
        two parts of a stream is whole (a stream's own decoder, as ``on_output``
        sees it); one cut by the drop is a U+FFFD."""
        decoders = {name: codecs.getincrementaldecoder("utf-8")("replace") for name in STREAMS}
        while head:
            part = head.pop()
            yield part.stream, decoders[part.stream].decode(part.data)
        if any(self.dropped.values()):
            for name in STREAMS:
                if self.dropped[name]:  # its text goes on after the gap: what it began there is cut
                    yield name, decoders[name].decode(b"", final=True)
                    decoders[name] = codecs.getincrementaldecoder("utf-8")("replace")
            yield None, ""  # the gap
        while tail:
            part = tail.popleft()
            yield part.stream, decoders[part.stream].decode(part.data)
        for name in STREAMS:
            yield name, decoders[name].decode(b"", final=True)

    def _views(self, pieces: Iterator[tuple[str | None, str]]) -> dict[str, str]:
        """The texts, each grown in place (``+=`` on a local string of its own
        is CPython's append, not a copy) as the parts are decoded and let go:
        a stream's text is ``output`` itself when it is the only one written."""
        both = all(self.totals.values())
        output = stdout = stderr = ""
        for stream, text in pieces:
            if stream is None:
                output += self._marker(sum(self.dropped.values()))
                if both:
                    stdout += self._marker(self.dropped["stdout"])
                    stderr += self._marker(self.dropped["stderr"])
                continue
            output += text
            if both and stream == "stdout":
                stdout += text
            elif both:
                stderr += text
        if not both:
            stdout = output if self.totals["stdout"] else ""
            stderr = output if self.totals["stderr"] else ""
        return {"output": output, "stdout": stdout, "stderr": stderr}

    def _marker(self, dropped: int) -> str:
        if not dropped:
            return ""
        return (
            f"\n[... {dropped} bytes of output dropped: the block printed {self.printed} bytes, "
            f"more than {self.setting}={self.limit} ...]\n"
        )
