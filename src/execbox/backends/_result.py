"""One executed block's outcome, and how a finished process becomes one.

A block's path to the caller: the backend's own record (``ProcessOutcome``
for a process, a zygote unit or a ``docker exec``; ``CellOutcome`` for a
Jupyter cell) → ``Outcome`` → ``BlockResult`` → ``ExecutionResult``. Each
record becomes an ``Outcome`` in one place: ``outcome_to_result`` here for a
``ProcessOutcome``, ``jupyter._cell.cell_outcome`` for a cell. ``Outcome``
is keyword-only: nine fields of which five are strings or flags are too easy
to swap by position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from .._models import BlockResult, BlockStatus, Display, ErrorInfo, Limits
from ._failures import explain_failure
from ._process import ProcessOutcome

__all__ = ["Outcome", "missing_program", "outcome_to_result"]


@dataclass(kw_only=True)
class Outcome:
    """What a backend reports for one executed block."""

    status: str  # ok | failed | timeout | cancelled
    exit_code: int
    output: str  # stdout and stderr interleaved, with execbox's notes
    stdout: str
    stderr: str
    duration_s: float
    error: ErrorInfo | None = None
    timed_out: bool = False
    truncated: bool = False
    displays: tuple[Display, ...] = field(default=())
    peak_memory_mb: float | None = None

    def to_block(self, common: dict[str, Any]) -> BlockResult:
        return BlockResult(
            **common,
            status=cast(BlockStatus, self.status),
            exit_code=self.exit_code,
            output=self.output,
            stdout=self.stdout,
            stderr=self.stderr,
            error=self.error,
            displays=self.displays,
            duration_s=self.duration_s,
            timed_out=self.timed_out,
            truncated=self.truncated,
            peak_memory_mb=self.peak_memory_mb,
        )


def missing_program(program: str, install_hint: str) -> Outcome:
    """A block whose program is not on the PATH it runs with (exit 127, as a shell says)."""
    message = f"{program} is not installed here ({install_hint})\n"
    return Outcome(status="failed", exit_code=127, output=message, stdout="", stderr=message, duration_s=0.0)


def outcome_to_result(language: str, outcome: ProcessOutcome, limits: Limits) -> Outcome:
    """A finished process → the block's outcome, with errors explained."""
    cap = outcome.capture
    output, stdout, stderr = cap.combined.text(), cap.stdout.text(), cap.stderr.text()
    common: dict[str, Any] = dict(
        stdout=stdout,
        stderr=stderr,
        duration_s=outcome.duration_s,
        truncated=cap.truncated,
        peak_memory_mb=outcome.peak_memory_mb,
    )
    if outcome.cancelled and not outcome.timed_out:
        note = "Cancelled: the block and every process it started were killed."
        return Outcome(
            status="cancelled",
            exit_code=130,
            output=_append(output, note),
            error=ErrorInfo("Cancelled", note),
            **common,
        )
    if outcome.exit_code == 0:
        return Outcome(status="ok", exit_code=0, output=output, **common)
    error, note = explain_failure(
        language,
        outcome.exit_code,
        stderr,
        timed_out=outcome.timed_out,
        limits=limits,
        memory_exceeded_mb=outcome.memory_exceeded_mb,
        address_space_mb=outcome.address_space_mb,
        memory_rlimit=outcome.memory_rlimit,
        gpu_memory_exceeded_mb=outcome.gpu_memory_exceeded_mb,
    )
    return Outcome(
        status="timeout" if outcome.timed_out else "failed",
        exit_code=outcome.exit_code,
        output=_append(output, note) if note else output,
        error=error,
        timed_out=outcome.timed_out,
        **common,
    )


def _append(output: str, note: str) -> str:
    if output and not output.endswith("\n"):
        output += "\n"
    return output + note + "\n"
