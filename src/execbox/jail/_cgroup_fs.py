"""A cgroup's files written and its folder removed: the one way
``_cgroups.py`` and ``_cgroup_detect.py`` touch the cgroup filesystem
(a write as one ``write(2)``; a removal retried while the kernel says EBUSY,
until a deadline)."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

__all__ = ["rmdir", "write", "write_try"]


def write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def write_try(path: Path, value: str) -> None:
    try:
        write(path, value)
    except OSError:
        pass


def rmdir(path: Path, wait_s: float = 0.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                return False
            time.sleep(0.005)
