"""Progress of long work (an image build, a venv made, a container or a
kernel started): what ``on_progress=`` takes and what shows it when the
caller passes nothing.

A step is a short text ("creating virtual environment at ...", "building
execbox/python:..."). ``on_progress`` is one of:

- ``None`` (the default): a ``ProgressReporter`` made for the work: a
  transient spinner with the step on stderr where stderr is a terminal,
  else an INFO line of the ``execbox`` logger per step;
- a callable taking the step's text (it gets every step, in order);
- a ``ProgressReporter`` (``lines=True`` keeps every step on stderr: the CLI);
- ``False``: nothing is shown.

The long work runs inside ``reporting(on_progress)``, which hands the
layers below one plain callable and stops the spinner when the work ends.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Self, TextIO

from ._errors import ConfigurationError

__all__ = ["LASTING_S", "OnProgress", "Progress", "ProgressReporter", "check_on_progress", "reporting"]

# Called with a short description of each step of long work.
Progress = Callable[[str], None]
# What an ``on_progress=`` option takes (see the module's docstring).
OnProgress = Progress | bool | None

LOGGER = logging.getLogger("execbox")
LASTING_S = 2.0  # a step that took this long stays on the terminal, with its time


def check_on_progress(on_progress: Any, owner: str) -> OnProgress:
    """``on_progress`` if it is one of what the option takes, else
    ``ConfigurationError`` naming ``owner`` (``"DockerExecutor"``)."""
    if on_progress is None or isinstance(on_progress, bool) or callable(on_progress):
        return on_progress
    raise ConfigurationError(
        f"{owner}(on_progress={on_progress!r}): give a callable that takes each step's text, "
        "False to show nothing, or None for the default (a spinner on a terminal, log lines otherwise)"
    )


@contextmanager
def reporting(on_progress: OnProgress) -> Iterator[Progress]:
    """The callable the long work inside reports its steps to; a default
    or given ``ProgressReporter`` is closed (its spinner gone) at the end.
    Nested uses share the outer one's reporter."""
    if on_progress is False:
        yield _silent
        return
    reporter = ProgressReporter() if on_progress is None or on_progress is True else on_progress
    if not isinstance(reporter, ProgressReporter):
        yield reporter
        return
    with reporter:
        yield reporter


def _silent(step: str) -> None:
    return None


class ProgressReporter:
    """Shows the steps of long work: on a terminal (``stream``, default
    stderr) a transient spinner with the current step, a step that took
    ``LASTING_S`` or more kept as a line with its time; elsewhere an INFO
    line of the ``execbox`` logger per step. ``lines=True`` keeps every
    step as a line (plain ``execbox: step`` lines off a terminal), as the
    CLI shows them. Usable again after ``close()``."""

    def __init__(self, *, lines: bool = False, stream: TextIO | None = None) -> None:
        self.lines = lines
        self._stream = stream
        self._lock = threading.Lock()
        self._depth = 0  # the ``with`` blocks open on it
        self._step: tuple[str, float] | None = None  # the step shown now and when it began
        self._spinning = False

    def __repr__(self) -> str:
        return f"ProgressReporter(lines={self.lines})"

    @property
    def stream(self) -> TextIO:
        return self._stream if self._stream is not None else sys.stderr

    def __call__(self, step: str) -> None:
        stream = self.stream
        if not _is_terminal(stream):
            if self.lines:
                print(f"execbox: {step}", file=stream, flush=True)
            else:
                LOGGER.info("%s", step)
            return
        with self._lock:
            self._end_step()
            self._step = (step, time.monotonic())
            if self.lines:
                _SPINNER.print(stream, f"[dim]•[/dim] {_escape(step)}")
            if not self._spinning:
                self._spinning = True
                _SPINNER.join(stream)
            _SPINNER.show(step)

    def close(self) -> None:
        """Stop showing: the spinner goes (when no other reporter shows one)."""
        with self._lock:
            self._end_step()
            if self._spinning:
                self._spinning = False
                _SPINNER.leave()

    def __enter__(self) -> Self:
        with self._lock:
            self._depth += 1
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._depth -= 1
            last = self._depth == 0
        if last:
            self.close()

    def _end_step(self) -> None:
        if self._step is None:
            return
        step, began = self._step
        self._step = None
        took = time.monotonic() - began
        if took >= LASTING_S:
            _SPINNER.print(self.stream, f"[green]✓[/green] {_escape(step)} [dim]({took:.0f} s)[/dim]")


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or closed
        return False


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


class _Spinner:
    """The one status line on the terminal, shared by the reporters that
    show a step now (two live displays on one terminal garble it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._status: Any = None

    def join(self, stream: TextIO) -> None:
        with self._lock:
            self._users += 1
            if self._status is None:
                from rich.console import Console

                self._status = Console(file=stream).status("")
                self._status.start()

    def show(self, step: str) -> None:
        with self._lock:
            if self._status is not None:
                self._status.update(_escape(step))

    def print(self, stream: TextIO, markup: str) -> None:
        with self._lock:
            if self._status is not None:
                self._status.console.print(markup, highlight=False)
                return
        from rich.console import Console

        Console(file=stream).print(markup, highlight=False)

    def leave(self) -> None:
        with self._lock:
            self._users -= 1
            if self._users == 0 and self._status is not None:
                status, self._status = self._status, None
                status.stop()


_SPINNER = _Spinner()
