"""Progress of slow set-up steps (creating a venv...) on the terminal."""

from __future__ import annotations

import sys
from collections.abc import Callable


def progress_printer() -> Callable[[str], None]:
    """A callback that shows each set-up step: a rich spinner line on a
    terminal, a plain line on stderr otherwise."""
    if not sys.stderr.isatty():
        return lambda step: print(f"execbox: {step}", file=sys.stderr)
    from rich.console import Console

    console = Console(stderr=True)
    status = console.status("")
    state = {"started": False}

    def show(step: str) -> None:
        if step == "environment ready":
            status.stop()
            console.print(f"[green]✓[/green] {step}")
            return
        if not state["started"]:
            status.start()
            state["started"] = True
        console.print(f"[dim]•[/dim] {step}")
        status.update(step)

    return show
