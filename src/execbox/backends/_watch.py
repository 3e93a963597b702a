"""The one loop that watches a running block, for every backend: its output
into the bounded capture (and the ``on_output`` callback), its deadline, its
cancellation, and the drain after a kill.

What differs between backends is how output arrives and how a block is
killed, so each gives the loop a ``Source``: a process's two pipes and its
pidfd (``_process``), a ``docker exec``'s multiplexed socket
(``docker/_exec``), a Jupyter kernel's messages (``jupyter/_cell``). The
loop decides when to stop:

- at the deadline: what had come and was not read yet is read (a thread
  scheduled late on a loaded host must not call a block that ended in time
  a timeout); then, if it is not over, ``timed_out``, ``source.kill()``
  once, and what is still coming is read for up to ``drain_s`` (something
  we could not kill may hold the output open: after that it is given up on);
- when ``cancel`` is set: the same, ``cancelled``; a cancellation set before
  the loop starts kills at once and reads nothing;
- when the source's output has ended and the block with it. With
  ``kill_when_ended``, a block that ends while its output is still open
  (a grandchild holds the pipes) is killed then, and drained like above.

``Cancellation`` lives here (not in ``_process``) because the loop is what
it wakes; ``_process`` re-exports it for the backends.
"""

from __future__ import annotations

import codecs
import os
import selectors
import threading
import time
from collections.abc import Callable
from typing import Protocol, Self

from .._models import Display
from .._run_events import EventSink
from ._output import Capture

__all__ = ["DRAIN_GRACE_S", "Cancellation", "FdWaiter", "Output", "OutputCallback", "Source", "watch_loop"]

# After the block has ended or been killed, how long to keep reading what
# is still coming before giving up on a holder we could not kill.
DRAIN_GRACE_S = 2.0

OutputCallback = Callable[[str, str], None]


class Cancellation:
    """A thread-safe flag that wakes a running block's loop."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._read_fd, self._write_fd = os.pipe()
        os.set_blocking(self._read_fd, False)

    @property
    def fileno(self) -> int:
        return self._read_fd

    def is_set(self) -> bool:
        return self._event.is_set()

    def cancel(self) -> None:
        if not self._event.is_set():
            self._event.set()
            try:
                os.write(self._write_fd, b"x")
            except OSError:
                pass

    def close(self) -> None:
        for fd in (self._read_fd, self._write_fd):
            try:
                os.close(fd)
            except OSError:
                pass


class Output:
    """A block's output as it comes: the bounded capture
    (``Limits.max_output_bytes``), and the callback as decoded text."""

    def __init__(self, limit: int, on_output: OutputCallback | None) -> None:
        self.capture = Capture(limit)
        self.on_output = on_output
        self._decoders = {
            name: codecs.getincrementaldecoder("utf-8")("replace") for name in ("stdout", "stderr")
        }

    def feed(self, stream: str, data: bytes) -> None:
        """Bytes of ``stream`` ("stdout" or "stderr"); a character split
        between two reads reaches the callback whole."""
        self.capture.feed(stream, data)
        if self.on_output is not None:
            text = self._decoders[stream].decode(data)
            if text:
                self.on_output(stream, text)

    def display(self, display: Display) -> None:
        """A rich output as it comes, for a run's event sink."""
        if isinstance(self.on_output, EventSink):
            self.on_output.display(display)

    def feed_text(self, stream: str, text: str) -> None:
        """Text that came whole (a kernel's stream message)."""
        if not text:
            return
        self.capture.feed(stream, text.encode("utf-8", "replace"))
        if self.on_output is not None:
            self.on_output(stream, text)


class Source(Protocol):
    """A running block as the loop sees it."""

    closed: bool  # its output has ended
    ended: bool  # the block has ended (its output may still be open)

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        """Wait up to ``timeout`` s for output, the block's end or ``cancel``
        (None once the loop no longer listens for it); feed what came."""

    def kill(self) -> None:
        """Stop the block (and, where it applies, everything it started)."""


def watch_loop(
    source: Source,
    *,
    deadline: float,
    cancel: Cancellation | None,
    drain_s: float = DRAIN_GRACE_S,
    kill_when_ended: bool = False,
) -> tuple[bool, bool]:
    """Watch ``source`` until it is over (module docstring); returns
    (timed_out, cancelled). ``source.kill()`` runs at most once."""
    timed_out = cancelled = killed = False
    drain_until: float | None = None

    def stop() -> None:
        nonlocal killed, drain_until
        if not killed:
            killed = True
            source.kill()
            drain_until = time.monotonic() + drain_s

    def over() -> bool:
        # the output has closed, and the block has ended (it may close its
        # output and go on working) or been killed
        return source.closed and (source.ended or killed)

    if cancel is not None and cancel.is_set():
        stop()
        return False, True
    while not over():
        now = time.monotonic()
        limit = drain_until if drain_until is not None else deadline
        if now >= limit:
            if drain_until is not None:
                break  # something we could not kill holds the output
            source.wait(0, None)
            if over():
                break
            timed_out = True
            stop()
            continue
        source.wait(limit - now, None if killed else cancel)
        if over():
            break  # a cancellation that came with the end is too late to matter
        if cancel is not None and not killed and cancel.is_set():
            cancelled = True
            stop()
        if kill_when_ended and source.ended:
            # The block is done: whatever it left running goes too, so that
            # a grandchild holding the output cannot keep us waiting.
            stop()
    if kill_when_ended:
        stop()
    return timed_out, cancelled


class FdWaiter:
    """One ``select`` over a source's descriptors and the cancellation pipe:
    no thread per stream, no polling. ``add(fd, handler)``: ``handler(fd)``
    runs when ``fd`` is readable."""

    def __init__(self) -> None:
        self._selector = selectors.DefaultSelector()
        self._cancel_fd: int | None = None

    def add(self, fd: int, handler: Callable[[int], None]) -> None:
        self._selector.register(fd, selectors.EVENT_READ, handler)

    def remove(self, fd: int) -> None:
        self._selector.unregister(fd)

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        fd = None if cancel is None else cancel.fileno
        if fd != self._cancel_fd:  # the loop stopped listening (a readable pipe would spin), or starts
            if self._cancel_fd is not None:
                self._selector.unregister(self._cancel_fd)
            if fd is not None:
                self._selector.register(fd, selectors.EVENT_READ, None)
            self._cancel_fd = fd
        for key, _ in self._selector.select(timeout):
            if key.data is not None:
                key.data(key.fd)

    def close(self) -> None:
        self._selector.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
