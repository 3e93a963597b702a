"""Progress of slow set-up steps (creating a venv, building an image...) on
the terminal: ``execbox._progress``'s reporter, every step kept as a line."""

from __future__ import annotations

from .._progress import ProgressReporter


def progress_printer() -> ProgressReporter:
    """A reporter that shows each set-up step: a rich spinner and a line
    per step on a terminal, a plain ``execbox: step`` line on stderr
    otherwise. The work it is given to stops its spinner when it ends."""
    return ProgressReporter(lines=True)
