"""The workspace folder of ``run``, ``exec`` and ``chat``: the one given
with ``--workdir``, or a temporary one that is kept when the blocks left
files in it (a line on stderr says where) and removed when they left none.
A temporary workspace removed on exit lost the files the result had just
reported ("Files created or changed: primes.txt")."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from .._workspace import INTERNAL_DIR

__all__ = ["cli_workspace", "kept_note"]


def kept_note(path: str) -> str:
    return f"execbox: the files are in {path} (kept; --workdir DIR to choose where)"


@contextmanager
def cli_workspace(workdir: str | None) -> Iterator[str]:
    """``workdir``, or a new temporary folder for the executor (given as
    its workspace, so that the executor leaves it): on leaving, kept with
    ``kept_note`` on stderr if anything but execbox's own ``.execbox/`` is
    in it, else removed."""
    if workdir is not None:
        yield workdir
        return
    path = tempfile.mkdtemp(prefix="execbox-")
    try:
        yield path
    finally:
        if _left_files(path):
            print(kept_note(path), file=sys.stderr, flush=True)
        else:
            shutil.rmtree(path, ignore_errors=True)


def _left_files(path: str) -> bool:
    try:
        with os.scandir(path) as entries:
            return any(entry.name != INTERNAL_DIR for entry in entries)
    except OSError:
        return False
