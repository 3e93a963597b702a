"""A kernel made usable again around a block: revived before it where it
died or was stopped since the last one (``revive``); interrupted, or
restarted, after a timeout, a cancel, a stall or a death (``settle``). Each
gives the note the block's output starts with."""

from __future__ import annotations

from ..._models import ErrorInfo
from ._cell import ANSWER_S, CellOutcome, kernel_stopped, wait_done
from ._channels import ChannelStalled
from ._kernel_base import Kernel

__all__ = ["INTERRUPT_GRACE_S", "revive", "settle"]

INTERRUPT_GRACE_S = 3.0


def revive(kernel: Kernel) -> str:
    """A kernel that died or was stopped since the last block (a thread
    of an earlier block did it) is restarted before this one; the note."""
    alive = kernel.alive()
    if alive and not kernel_stopped(kernel.pid):
        return ""
    code = kernel.exit_code()
    how = "been stopped" if alive else "died" + ("" if code is None else f" (exit code {code})")
    kernel.restart()
    return (
        f"The kernel had {how} since the last block (a thread of an earlier block?): it was restarted "
        "before this one; variables and imports of earlier blocks are lost."
    )


def settle(kernel: Kernel, outcome: CellOutcome, memory_mb: int) -> str:
    """After a timeout, a cancel or a death: get the kernel usable again;
    the note for the output."""
    if outcome.status in ("timeout", "cancelled"):
        try:
            kernel.interrupt()
        except ChannelStalled:
            pass  # and it does not stop: restarted below
        else:
            if wait_done(kernel, outcome.msg_id, INTERRUPT_GRACE_S):
                return "The kernel was interrupted; its state (variables, imports) is kept."
        kernel.restart()
        return "The kernel did not stop on interrupt and was restarted: its state is lost."
    if outcome.status == "stalled":
        kernel.restart()
        outcome.error = outcome.error or ErrorInfo(
            "KernelStalled", f"the kernel stopped answering for {ANSWER_S:.0f} s while the block ran"
        )
        return (
            "The kernel stopped answering while the block ran (it was stopped?) and was restarted: "
            "variables and imports of earlier blocks are lost."
        )
    if outcome.status == "died":
        code = kernel.exit_code()
        memory = kernel.memory_exceeded()
        kernel.restart()
        if memory:
            why = f"memory limit {memory_mb} MB exceeded (Limits.memory_mb)"
            outcome.error = ErrorInfo("MemoryLimit", f"the kernel was killed: {why}")
            return f"The kernel was killed: {why}. It was restarted; variables and imports are lost."
        how = (
            "no exit status: on a server"
            if code is None
            else f"exit code {code}"
            if code >= 0
            else f"signal {-code}"
        )
        outcome.error = ErrorInfo("KernelDied", f"the kernel died ({how})")
        return (
            f"The kernel died ({how}): os._exit, a crash, or memory. It was restarted; "
            "variables and imports of earlier blocks are lost."
        )
    return ""
