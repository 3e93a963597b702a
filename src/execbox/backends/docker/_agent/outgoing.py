"""The agent's frames to the host (``agent.py``, beside this file, imports
it): queued by block and written to the agent's stdout without blocking,
a frame of each block in turn, so that a block flooding its output does
not hold up the others' ends behind it. Runs inside the container:
standard library only, Python 3.6 or later.
"""

import collections
import os
import select

__all__ = ["Outgoing"]


class Outgoing:
    """Frames waiting for ``fd`` (made non-blocking), which is in ``poll``
    for POLLOUT exactly while a frame waits for room in the pipe."""

    def __init__(self, fd, poll):
        self.fd, self.poll = fd, poll
        # by block (each bounded by its window), written in turn
        self.queued = collections.OrderedDict()
        self.writing = None  # what is left of the frame being written (frames are never interleaved)
        self.polling = False
        os.set_blocking(fd, False)

    def send(self, frame, key=0):
        """Queue a frame of block ``key`` (0: the agent's own) and write what the pipe takes."""
        self.queued.setdefault(key, collections.deque()).append(frame)
        self.flush()

    def flush(self):
        """Write queued frames, a frame of each block in turn, until the pipe is full."""
        while True:
            if self.writing is None:
                if not self.queued:
                    break
                key, frames = next(iter(self.queued.items()))
                del self.queued[key]
                self.writing = memoryview(frames.popleft())
                if frames:
                    self.queued[key] = frames  # at the back of the line
            try:
                written = os.write(self.fd, self.writing)
            except BlockingIOError:
                break
            self.writing = self.writing[written:] if written < len(self.writing) else None
        waiting = self.writing is not None
        if waiting != self.polling:
            if waiting:
                self.poll.register(self.fd, select.POLLOUT)
            else:
                self.poll.unregister(self.fd)
            self.polling = waiting
