"""A box as the host holds it: the socket of the box's init (in the jail,
``_zygote/box.py``), the box's cgroup, and the code process it has ready for
the next block; and one block's share of that cgroup (``BlockShare``):
what the runner asks of a block's cgroup, as deltas since the block began.
"""

from __future__ import annotations

import os
import socket
import time

from ._cgroups import BlockCgroup
from ._sockets import recv_fds_now

__all__ = ["BlockCounts", "BlockShare", "Box"]


class BlockCounts:
    """What a box's cgroup counted for one block, read as the block ended
    (before the box is cleaned and given to the next): the runner asks it
    as it asks a block's own cgroup."""

    def __init__(self, oom: bool, peak_mb: float | None) -> None:
        self._oom = oom
        self._peak_mb = peak_mb

    def oom_killed(self) -> bool:
        return self._oom

    def peak_memory_mb(self) -> float | None:
        return self._peak_mb

    def remove(self) -> None:
        """Nothing to remove: the group is the box's."""


class BlockShare:
    """One block's view of its box's cgroup: OOM kills counted since the
    block began, the peak memory since then (cgroup v1: the high-water mark
    reset; v2: ``memory.peak`` reset through a descriptor of its own, Linux
    6.12 and later; before that the kernel cannot reset it and the block's
    peak is not known: None). ``remove`` leaves the group to the box."""

    def __init__(self, group: BlockCgroup) -> None:
        self.group = group
        self._oom_base = 0
        self._peak_fd: int | None = None
        self._peak_known = False
        self.owned = False  # True: a session's, whose remove removes the group
        memory = group.by_controller.get("memory")
        if memory is not None and group.version == 2:
            try:
                self._peak_fd = os.open(memory / "memory.peak", os.O_RDWR | os.O_CLOEXEC)
            except OSError:
                self._peak_fd = None

    def begin(self) -> None:
        """A block starts: the counts from here."""
        self._oom_base = self.group.oom_kills()
        self._peak_known = False
        memory = self.group.by_controller.get("memory")
        if memory is None:
            return
        try:
            if self.group.version == 1:
                with open(memory / "memory.max_usage_in_bytes", "w") as handle:
                    handle.write("0")
                self._peak_known = True
            elif self._peak_fd is not None:
                os.write(self._peak_fd, b"reset\n")
                self._peak_known = True
        except OSError:
            pass  # v2 before Linux 6.12: memory.peak is the box's, not the block's

    def oom_killed(self) -> bool:
        return self.group.oom_kills() > self._oom_base

    def counts(self, oom: bool = True) -> BlockCounts:
        """The block's counts now (``oom`` False: not read, taken as none)."""
        return BlockCounts(oom and self.oom_killed(), self.peak_memory_mb())

    def peak_memory_mb(self) -> float | None:
        if not self._peak_known:
            return None
        if self._peak_fd is None:
            return self.group.peak_memory_mb()
        try:
            return round(int(os.pread(self._peak_fd, 64, 0)) / (1 << 20), 1)
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        self.group.kill()

    def pids(self) -> list[int]:
        return self.group.pids()

    def pids_current(self) -> int:
        return self.group.pids_current()

    def open_procs(self) -> list[int]:
        return self.group.open_procs()

    def remove(self) -> None:
        """The block is over: the group stays with its box (unless the
        caller owns the box: a session's)."""
        if self.owned:
            self.close()
            self.group.remove()

    def close(self) -> None:
        if self._peak_fd is not None:
            os.close(self._peak_fd)
            self._peak_fd = None


class Box:
    """A box the pool holds: ``sock`` its init's, ``code`` the socket of the
    code process it has ready (after ``ready``), ``share`` its cgroup as one
    block sees it (None: no cgroups here)."""

    def __init__(self, sock: socket.socket, group: BlockCgroup | None) -> None:
        self.sock = sock
        self.group = group
        self.share = BlockShare(group) if group is not None else None
        self.code: socket.socket | None = None
        self.blocks = 0
        self.idle_since = time.monotonic()

    def take_ready(self) -> bool | None:
        """Take the init's ``ready`` (and the code process's socket) if it
        came: True when the box is ready, False not yet, None when the box
        is gone (its init left: thrown away after something odd, or retired)."""
        try:
            data, fds = recv_fds_now(self.sock, 64, 1)
        except BlockingIOError:
            return False
        except OSError:
            return None
        if data != b"ready" or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            return None
        self.code = socket.socket(fileno=fds[0])
        self.idle_since = time.monotonic()
        return True

    def close(self) -> None:
        """Let go of the box: its init sees EOF and leaves, its namespaces
        and whatever is left in them go with it; then its cgroup."""
        if self.code is not None:
            self.code.close()
            self.code = None
        self.sock.close()
        if self.share is not None:
            self.share.close()
        if self.group is not None:
            self.group.remove()
