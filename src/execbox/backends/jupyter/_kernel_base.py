"""What every kernel of the Jupyter backend is to its executor: one
interface for the local kernel (``_kernel``), the jailed one
(``_sandboxed``) and a kernel on a server (``_gateway``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from ._channels import Channels

__all__ = ["Kernel"]


class Kernel(ABC):
    """One kernel and its channels.

    ``channels``: how cells reach it (None when stopped); ``pid``: its
    process on this host (None: not ours to see); ``restarted``: set by
    ``restart`` so the owner re-runs its set-up; ``jail_id``: the host uid
    and gid its cells run as when that is not this process's own (the owner
    hands them the files it writes)."""

    channels: Channels | None = None
    pid: int | None = None
    restarted: bool = False

    @abstractmethod
    def start(self) -> None:
        """Start the kernel and wait until it answers."""

    @abstractmethod
    def stop(self) -> None:
        """Stop it and everything it started; no error if already stopped."""

    def restart(self) -> None:
        """A fresh kernel (state lost)."""
        self.stop()
        self.start()
        self.restarted = True

    @abstractmethod
    def alive(self) -> bool:
        """Whether the kernel still runs (or, remote: its channels are open)."""

    def exit_code(self) -> int | None:
        """The kernel process's exit status once it died (None: unknown or alive)."""
        return None

    def memory_exceeded(self) -> bool:
        """Whether a memory limit of ours killed it (none on a kernel that has none)."""
        return False

    @abstractmethod
    def interrupt(self) -> None:
        """Interrupt the running cell."""

    @abstractmethod
    def kill_strays(self) -> None:
        """Kill what the last cell started and left behind."""

    @property
    def jail_id(self) -> tuple[int, int] | None:
        return None
