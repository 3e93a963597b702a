"""One executed block's outcome, and how a finished process becomes one."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._failures import explain_failure
from .._models import BlockResult, Display, ErrorInfo, Limits
from ._process import ProcessOutcome

__all__ = ["Outcome", "outcome_to_result"]


@dataclass
class Outcome:
    """What a backend reports for one executed block."""

    status: str
    exit_code: int
    output: str
    stdout: str
    stderr: str
    error: ErrorInfo | None
    duration_s: float
    timed_out: bool
    truncated: bool
    displays: tuple[Display, ...] = field(default=())

    def to_block(self, common: dict[str, Any]) -> BlockResult:
        return BlockResult(**common, status=self.status, exit_code=self.exit_code,  # type: ignore[arg-type]
                           output=self.output, stdout=self.stdout, stderr=self.stderr, error=self.error,
                           displays=self.displays, duration_s=self.duration_s, timed_out=self.timed_out,
                           truncated=self.truncated)


def outcome_to_result(language: str, outcome: ProcessOutcome, limits: Limits) -> Outcome:
    """A finished process → the block's outcome, with errors explained."""
    cap = outcome.capture
    output, stdout, stderr = cap.combined.text(), cap.stdout.text(), cap.stderr.text()
    if outcome.cancelled and not outcome.timed_out:
        note = "Cancelled: the block and every process it started were killed."
        return Outcome("cancelled", 130, _append(output, note), stdout, stderr,
                        ErrorInfo("Cancelled", note), outcome.duration_s, False, cap.truncated)
    if outcome.exit_code == 0:
        return Outcome("ok", 0, output, stdout, stderr, None, outcome.duration_s, False, cap.truncated)
    error, note = explain_failure(language, outcome.exit_code, stderr, timed_out=outcome.timed_out,
                                  limits=limits, memory_exceeded_mb=outcome.memory_exceeded_mb,
                                  address_space_mb=outcome.address_space_mb)
    status = "timeout" if outcome.timed_out else "failed"
    return Outcome(status, outcome.exit_code, _append(output, note) if note else output, stdout, stderr,
                    error, outcome.duration_s, outcome.timed_out, cap.truncated)


def _append(output: str, note: str) -> str:
    if output and not output.endswith("\n"):
        output += "\n"
    return output + note + "\n"

