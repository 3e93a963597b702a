"""Changing who owns workspace paths, from the host side, without ever
following a link a block planted.

The host (often root) hands the workspace to the unprivileged identity
blocks run as. A block may have swapped any folder on the way for a link to
a host folder (``sub -> /dev``, then ``sub/null``): a path-based ``lchown``
follows links in the middle of a path and would give away the host's
``/dev/null``. Here every step is opened from its parent's descriptor with
``O_NOFOLLOW | O_DIRECTORY``, and the last one is changed with
``fchownat(AT_SYMLINK_NOFOLLOW)``: a link anywhere on the way is skipped,
never followed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable

__all__ = ["hand_over", "reown_tree"]

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def hand_over(root: str | os.PathLike[str], uid: int, gid: int, paths: Iterable[str] = ()) -> None:
    """Give ``uid:gid`` the folder ``root`` and, for each relative path in
    ``paths``, every folder leading to it and the path itself. A step that
    is a link, or missing, ends that path's walk (nothing past it is
    touched)."""
    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return
    try:
        os.fchown(top, uid, gid)
        for relative in paths:
            _hand_over_path(top, [p for p in relative.split(os.sep) if p not in ("", ".")], uid, gid)
    finally:
        os.close(top)


def _hand_over_path(top: int, parts: list[str], uid: int, gid: int) -> None:
    if not parts or ".." in parts:
        return
    fd = os.dup(top)
    try:
        for index, part in enumerate(parts):
            try:
                os.chown(part, uid, gid, dir_fd=fd, follow_symlinks=False)
            except OSError:
                return
            if index == len(parts) - 1:
                return
            try:
                child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                return  # a link or a file where a folder belongs: not followed
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def reown_tree(
    root: str | os.PathLike[str], uid: int, gid: int, owned_by: Callable[[int], bool], *, limit: int
) -> int:
    """Give ``uid:gid`` every entry under ``root`` whose owner matches
    ``owned_by`` (the jail identities of earlier executors), walking by
    descriptor (``os.fwalk``: no link followed). Stops after ``limit``
    entries; returns how many were looked at."""
    seen = 0
    for _, dirs, files, dir_fd in os.fwalk(root, follow_symlinks=False):
        for name in (*dirs, *files):
            seen += 1
            if seen > limit:
                return seen
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
                if owned_by(st.st_uid) and not stat.S_ISLNK(st.st_mode):
                    os.chown(name, uid, gid, dir_fd=dir_fd, follow_symlinks=False)
            except OSError:
                continue
    return seen
