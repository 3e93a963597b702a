"""The code execbox sends to a Jupyter kernel besides the blocks: the
program ``_inkernel.py`` (read when first needed) followed by one call, its
arguments given as Python literals (data, never spliced into the program).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

__all__ = ["INKERNEL_SOURCE", "setup_code", "shell_code"]

# The program, run in the kernel: see its docstring.
INKERNEL_SOURCE = Path(__file__).with_name("_inkernel.py")


@functools.cache
def _program() -> str:
    return INKERNEL_SOURCE.read_text(encoding="utf-8")


def setup_code(limit: int, cwd: str | None = None) -> str:
    """Run once in each new kernel, silently: streams flushed as they come,
    each cell's output capped at ``limit`` characters, the working folder
    ``cwd`` (when given). Leaves no name behind."""
    return f"{_program()}\n__execbox_setup({limit!r}, {cwd!r})\ndel __execbox_setup, __execbox_shell\n"


def shell_code(argv: Sequence[str]) -> str:
    """A ``sh`` / ``bash`` block: ``argv`` run as a subprocess of the kernel,
    its output streamed into the cell, its exit status in ``__execbox_rc``."""
    return (
        f"{_program()}\ntry:\n    __execbox_rc = __execbox_shell({list(argv)!r})\n"
        "finally:\n    del __execbox_setup\n"
    )
