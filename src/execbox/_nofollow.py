"""File operations inside a folder a block can write to, that never follow
a link: folders opened one level at a time from their parent's descriptor
(``O_NOFOLLOW``), files opened without following links nor blocking (a FIFO
planted by the code must not hang the host), files replaced by a rename so
that whatever was planted at the name is never opened.

The ``Workspace`` reads and writes through these; a backend that makes a
folder in the workspace for its own use does too.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from contextlib import suppress
from pathlib import Path

from ._errors import PathEscapeError, WorkspaceError

__all__ = ["DIR_FLAGS", "lstat_under", "open_folders", "read_under", "write_under"]

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def open_folders(
    root: Path, folders: list[str] | tuple[str, ...], given: str, *, create: bool, repair: bool
) -> int:
    """A descriptor of root/folders..., opened one level at a time without
    following links; missing folders made when ``create``; a link or file in
    the way removed when ``repair``, else refused."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in folders:
            child = _open_folder(fd, part, given, create=create, repair=repair)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _open_folder(parent: int, part: str, given: str, *, create: bool, repair: bool) -> int:
    for _ in range(3):  # code running meanwhile may swap things in: a few tries, then give up
        try:
            return os.open(part, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise WorkspaceError(f"cannot open {given!r} in the workspace: no folder {part!r}") from None
            try:
                os.mkdir(part, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise WorkspaceError(f"cannot open {given!r} in the workspace: {exc.strerror}") from None
            if not repair:
                raise PathEscapeError(given, f"goes through {part!r}, which is a link or a file") from None
            with suppress(FileNotFoundError):
                os.unlink(part, dir_fd=parent)
    raise WorkspaceError(f"cannot open {given!r} in the workspace: {part!r} keeps changing")


def lstat_under(root: Path, parts: tuple[str, ...], given: str) -> os.stat_result | None:
    """What is at ``parts`` (not followed if a link), its folders opened
    without following links; None when nothing is there."""
    if not parts:
        return os.stat(root)
    *folders, name = parts
    parent = open_folders(root, folders, given, create=False, repair=False)
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise WorkspaceError(f"cannot look at {given!r} in the workspace: {exc.strerror}") from None
    finally:
        os.close(parent)


def read_under(root: Path, parts: tuple[str, ...], given: str, limit: int | None = None) -> bytes:
    """The file's bytes; with ``limit``, at most ``limit + 1`` of them (more
    than ``limit`` tells the caller it is too big: the size a look before
    gave may have grown since, by code still running)."""
    *folders, name = parts
    parent = open_folders(root, folders, given, create=False, repair=False)
    try:
        # O_NONBLOCK: a FIFO planted by the code must not hang us on open
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise PathEscapeError(given, "is a symlink") from None
        raise WorkspaceError(f"cannot read {given!r} in the workspace: {exc.strerror}") from None
    finally:
        os.close(parent)
    mode = os.fstat(fd).st_mode  # before fdopen, which refuses a folder with an OSError
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise WorkspaceError(f"{given!r} is a folder, not a file: list it instead")
        raise WorkspaceError(f"{given!r} is not a regular file (a FIFO, socket or device): not read")
    with os.fdopen(fd, "rb") as handle:
        return handle.read() if limit is None else handle.read(limit + 1)


def write_under(root: Path, parts: tuple[str, ...], data: bytes, given: str, *, repair: bool) -> None:
    *folders, name = parts
    parent = open_folders(root, folders, given, create=True, repair=repair)
    try:
        if repair:
            _replace(parent, name, data, given)
            return
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(name, flags, 0o644, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathEscapeError(given, "is a symlink; execbox does not write through links") from None
            if exc.errno == errno.ENXIO:  # a FIFO nobody reads, or a socket
                raise WorkspaceError(
                    f"{given!r} is not a regular file (a FIFO or socket): not written; remove it first"
                ) from None
            raise WorkspaceError(f"cannot write {given!r}: {exc.strerror}") from None
    finally:
        os.close(parent)
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise WorkspaceError(f"{given!r} is not a regular file (a FIFO, socket or device): not written")
        handle.write(data)


def _replace(parent: int, name: str, data: bytes, given: str) -> None:
    """Write ``name`` in the folder ``parent`` as a new file renamed into
    place: whatever was planted there (a link, a FIFO, a socket) is
    replaced, never opened; a folder is first moved aside."""
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        with os.fdopen(os.open(temporary, flags, 0o644, dir_fd=parent), "wb") as handle:
            handle.write(data)
        for _ in range(3):  # code running meanwhile may plant again: a few tries, then give up
            try:
                os.rename(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
                return
            except IsADirectoryError:
                with suppress(OSError):
                    os.rename(
                        name, f"{name}.moved-{secrets.token_hex(8)}", src_dir_fd=parent, dst_dir_fd=parent
                    )
    except OSError as exc:
        reason = exc.strerror
    else:
        reason = f"a folder keeps being planted at {name!r}"
    with suppress(OSError):
        os.unlink(temporary, dir_fd=parent)
    raise WorkspaceError(f"cannot write {given!r}: {reason}")
