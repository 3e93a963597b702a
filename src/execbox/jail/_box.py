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
        self._events_fd: int | None = None
        memory = group.by_controller.get("memory")
        if memory is not None:  # held for the box's life: two reads and a write a block, no open
            v1 = group.version == 1
            peak, events = (
                ("memory.max_usage_in_bytes", "memory.oom_control")
                if v1
                else ("memory.peak", "memory.events")
            )
            for name, flags, slot in ((peak, os.O_RDWR, "_peak_fd"), (events, os.O_RDONLY, "_events_fd")):
                try:
                    setattr(self, slot, os.open(memory / name, flags | os.O_CLOEXEC))
                except OSError:
                    pass

    def begin(self) -> None:
        """A block starts: the counts from here."""
        self._oom_base = self._oom_kills()
        self._peak_known = False
        if self._peak_fd is None:
            return
        try:  # v1: the high-water mark written 0; v2: this descriptor's peak reset
            os.write(self._peak_fd, b"0" if self.group.version == 1 else b"reset\n")
            self._peak_known = True
        except OSError:
            pass  # v2 before Linux 6.12: memory.peak is the box's, not the block's

    def _oom_kills(self) -> int:
        if self._events_fd is None:
            return 0
        try:
            text = os.pread(self._events_fd, 4096, 0).decode()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
        return 0

    def oom_killed(self) -> bool:
        return self._oom_kills() > self._oom_base

    def counts(self, oom: bool = True) -> BlockCounts:
        """The block's counts now (``oom`` False: not read, taken as none)."""
        return BlockCounts(oom and self.oom_killed(), self.peak_memory_mb())

    def peak_memory_mb(self) -> float | None:
        if not self._peak_known or self._peak_fd is None:
            return None
        try:
            return round(int(os.pread(self._peak_fd, 64, 0)) / (1 << 20), 1)
        except (OSError, ValueError):
            return None

    def kill(self) -> None:
        """A block's processes are the box's init's to kill (the host's
        ``kill`` on the status socket): the init is in the group too. A
        session's box (``owned``) goes whole."""
        if self.owned:
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
        for fd in (self._peak_fd, self._events_fd):
            if fd is not None:
                os.close(fd)
        self._peak_fd = self._events_fd = None


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
