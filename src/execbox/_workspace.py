"""Workspace: the directory a run reads and writes.

A given directory, or a temporary one removed on ``close()``. Every path a
caller or a model names is resolved inside it: absolute paths, ``..`` and
symlinks that lead outside are refused. ``snapshot()`` and ``changes()`` tell
which files a run created or changed, never following symlinks.

Layout: user files at the top; execbox's own files (code files of blocks
without a filename, host-defined functions) under ``.execbox/``, which the
change report leaves out.

What a block leaves is hostile to the host (maybe root): folders are opened
from their parent's descriptor without following links (one swapped for a
link to a host folder meanwhile is never listed nor written through), files
without following links nor blocking (a FIFO) (``_nofollow``), and walks are lazy and
bounded (200k files left by a block made every later run 25 times slower
while the whole folder was listed before the cap applied).
"""

from __future__ import annotations

import builtins
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from ._errors import PathEscapeError, WorkspaceError
from ._nofollow import DIR_FLAGS, open_folders, read_under, write_under

__all__ = ["FileInfo", "Snapshot", "Workspace"]

INTERNAL_DIR = ".execbox"
# A run's change report stops after this many entries (a workspace pointed at
# a huge tree must not make every run slow), and this many folders deep (the
# walk holds two descriptors per level).
MAX_SCANNED_ENTRIES = 20_000
MAX_DEPTH = 64

_SETID = stat.S_ISUID | stat.S_ISGID


class Snapshot(dict[str, tuple[int, int, int]]):
    """(mtime, size, inode) of every regular file and symlink, by path.
    ``complete`` is False when the walk stopped at ``MAX_SCANNED_ENTRIES``
    entries or ``MAX_DEPTH`` levels."""

    complete: bool = True


@dataclass(frozen=True)
class FileInfo:
    """An entry of ``Workspace.list``; ``mtime`` in seconds since the epoch."""

    path: str
    size: int
    is_dir: bool
    mtime: float = 0.0


class Workspace:
    """Files in and out of a run, with safe paths.

    ``Workspace()`` makes a temporary directory (removed by ``close()``);
    ``Workspace("some/dir")`` uses (and creates) that directory and leaves it
    in place.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        if path is None:
            self._root = Path(tempfile.mkdtemp(prefix="execbox-")).resolve()
            self._owned = True
        else:
            given = Path(path).expanduser()
            if given.exists() and not given.is_dir():
                raise WorkspaceError(f"workspace {str(given)!r} is a file: give a directory")
            given.mkdir(parents=True, exist_ok=True)
            self._root = given.resolve()
            self._owned = False
        self._closed = False

    @property
    def path(self) -> Path:
        return self._root

    def __repr__(self) -> str:
        kind = "temporary" if self._owned else "given"
        return f"Workspace({str(self._root)!r}, {kind})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the directory if this workspace made it."""
        if self._owned and not self._closed:
            shutil.rmtree(self._root, ignore_errors=True)
        self._closed = True

    # -- safe paths -------------------------------------------------------

    def resolve(self, relative: str | os.PathLike[str]) -> Path:
        """The absolute path of ``relative`` inside the workspace.

        Refuses absolute paths, ``..`` that climbs out, and symlinks (at any
        level) that lead outside.
        """
        text = os.fspath(relative)
        if not text or text.strip() != text or "\0" in text:
            raise PathEscapeError(text, "is empty or has surrounding spaces or NUL bytes")
        if os.path.isabs(text) or text.startswith("~"):
            raise PathEscapeError(text, "is absolute")
        candidate = Path(os.path.normpath(self._root / text))
        if not _inside(candidate, self._root):
            raise PathEscapeError(text, "climbs out of the workspace with '..'")
        try:
            real = Path(os.path.realpath(candidate))
        except (
            OSError
        ) as exc:  # code running meanwhile swapped a link for a file (readlink: EINVAL) or removed it
            raise WorkspaceError(
                f"cannot resolve {text!r} in the workspace: it changed while execbox looked at it "
                f"({exc.strerror}); try again once the code that changes it has ended"
            ) from None
        if not _inside(real, self._root):
            raise PathEscapeError(text, "goes through a symlink that leads outside the workspace")
        if candidate.parts[len(self._root.parts) :][:1] == (INTERNAL_DIR,):
            raise PathEscapeError(text, f"is inside execbox's own {INTERNAL_DIR}/ folder")
        return candidate

    def write_text(self, relative: str, text: str) -> Path:
        return self.write_bytes(relative, text.encode("utf-8"))

    def write_bytes(self, relative: str, data: bytes) -> Path:
        """Write a file inside the workspace; never through a symlink (at any
        level, checked while walking down, so a link swapped in meanwhile by
        running code is not followed either)."""
        target = self.resolve(relative)
        write_under(self._root, target.relative_to(self._root).parts, data, relative, repair=False)
        return target

    def write_internal(self, relative: str, data: bytes) -> Path:
        """Write one of execbox's own files (under ``.execbox/``). What code
        planted on the way (a link, a file) is removed, and at the file's own
        name (a link, a folder, a FIFO) replaced or moved aside: never followed."""
        parts = _internal_parts(relative)
        write_under(self._root, parts, data, relative, repair=True)
        return self._root.joinpath(*parts)

    def read_internal(self, relative: str) -> bytes:
        """Read one of execbox's own files (refusing links, FIFOs, devices)."""
        return read_under(self._root, _internal_parts(relative), relative)

    def has_internal(self, relative: str) -> bool:
        """Whether one of execbox's own files is there, a regular file (a
        link or anything else at its name is not it)."""
        *folders, name = _internal_parts(relative)
        try:
            parent = open_folders(self._root, folders, relative, create=False, repair=False)
        except WorkspaceError:
            return False
        try:
            return stat.S_ISREG(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode)
        except OSError:
            return False
        finally:
            os.close(parent)

    def internal_folder(self, relative: str) -> int:
        """A descriptor of one of execbox's own folders, made where missing
        (what code planted on the way is removed, never followed)."""
        return open_folders(self._root, _internal_parts(relative), relative, create=True, repair=True)

    def remove_internal(self, relative: str) -> None:
        """Remove one of execbox's own files if it is there (a link planted
        at its name is removed, never followed; a folder is left)."""
        *folders, name = _internal_parts(relative)
        try:
            parent = open_folders(self._root, folders, relative, create=False, repair=False)
        except WorkspaceError:  # its folder is gone, or is a link: nothing of ours to remove
            return
        try:
            with suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                os.unlink(name, dir_fd=parent)
        finally:
            os.close(parent)

    # -- caller facets ------------------------------------------------------

    def upload(self, source: str | os.PathLike[str] | bytes, dest: str) -> Path:
        """Put a host file (a path) or bytes into the workspace at ``dest``."""
        if isinstance(source, bytes):
            return self.write_bytes(dest, source)
        return self.write_bytes(dest, Path(source).read_bytes())

    def download(self, relative: str, dest: str | os.PathLike[str] | None = None) -> bytes:
        """Read a workspace file (refusing symlinks); also copy it to ``dest``."""
        target = self.resolve(relative)
        data = read_under(self._root, target.relative_to(self._root).parts, relative)
        if dest is not None:
            Path(dest).write_bytes(data)
        return data

    def remove(self, relative: str) -> None:
        """Remove a file, a link (never followed) or an empty folder of the
        workspace; folders on the way are opened without following links.
        ``WorkspaceError`` when there is nothing at ``relative`` or it is a
        folder that is not empty."""
        text = os.fspath(relative)
        head, name = os.path.split(os.path.normpath(text)) if text else ("", "")
        if name in ("", ".", "..") or (not head and name == INTERNAL_DIR):
            raise PathEscapeError(text, "does not name a file or folder of the workspace")
        folders = (
            self.resolve(head).relative_to(self._root).parts if head else ()
        )  # the link itself: not followed
        parent = open_folders(self._root, folders, relative, create=False, repair=False)
        try:
            try:
                os.unlink(name, dir_fd=parent)
            except IsADirectoryError:
                os.rmdir(name, dir_fd=parent)
        except FileNotFoundError:
            raise WorkspaceError(f"no file {relative!r} in the workspace") from None
        except OSError as exc:
            raise WorkspaceError(f"cannot remove {relative!r}: {exc.strerror}") from None
        finally:
            os.close(parent)

    def list(self, relative: str = ".") -> list[FileInfo]:
        """Files and folders under ``relative``, recursively, without
        following symlinks; execbox's own folder left out."""
        parts = () if relative in (".", "") else self.resolve(relative).relative_to(self._root).parts
        top = open_folders(self._root, parts, relative, create=False, repair=False)
        found = [
            FileInfo(path, st.st_size, stat.S_ISDIR(st.st_mode), st.st_mtime)
            for path, st, _, _ in _walk(top, parts, Snapshot())
        ]
        return sorted(found, key=lambda info: info.path)

    # -- change report ----------------------------------------------------

    def snapshot(self, *, clear_setid: bool = False, internal: bool | Sequence[str] = True) -> Snapshot:
        """Identity of every regular file and symlink (not followed), up to
        ``MAX_SCANNED_ENTRIES`` entries (``Snapshot.complete`` says whether
        every one was seen).

        ``clear_setid``: also clear the set-user-ID and set-group-ID bits of
        every regular file, ``.execbox/`` included unless ``internal`` is
        False (the backend's blocks cannot write there), or only its
        subfolders named in ``internal`` (the ones they can write): a block
        must not leave a program that runs as its owner (root, when execbox
        runs as root) for someone on the host to start. ``.execbox/code``
        grows by a file a block, so walking it made every run slower than
        the last."""
        found = Snapshot()
        walks: list[tuple[tuple[str, ...], Snapshot]] = [((), found)]
        if clear_setid:
            if internal is True:
                walks.append(((INTERNAL_DIR,), Snapshot()))
            elif internal:
                walks += [((INTERNAL_DIR, folder), Snapshot()) for folder in internal]
        for parts, report in walks:  # .execbox/ walked apart (its own cap), not reported
            try:
                top = open_folders(self._root, parts, "/".join(parts) or ".", create=False, repair=False)
            except (WorkspaceError, OSError):  # gone (a local block removed it), or a link
                report.complete = False
                continue
            for path, st, parent, name in _walk(top, parts, report):
                if clear_setid:
                    _clear_setid(parent, name, st)
                if report is found and not stat.S_ISDIR(st.st_mode):
                    found[path] = (st.st_mtime_ns, st.st_size, st.st_ino)
        return found

    @staticmethod
    def changes(before: Snapshot, after: Snapshot) -> builtins.list[str]:  # list: the method above
        """Paths created or changed between two snapshots."""
        return sorted(path for path, ident in after.items() if before.get(path) != ident)


Level = tuple[int, Iterator[os.DirEntry[str]], str]


def _walk(
    top: int, parts: tuple[str, ...], report: Snapshot
) -> Iterator[tuple[str, os.stat_result, int, str]]:
    """(path, lstat, parent folder's descriptor, name) of each entry under
    the folder ``top`` (a descriptor, closed here) at ``parts``, depth
    first, ``.execbox/`` left out. Each folder is opened from its parent's
    descriptor with ``O_NOFOLLOW`` and read lazily; the walk stops after
    ``MAX_SCANNED_ENTRIES`` entries and goes no deeper than ``MAX_DEPTH``
    (``report.complete`` is then made False)."""
    first = _scan(top)
    stack: list[Level] = [] if first is None else [(*first, "".join(part + "/" for part in parts))]
    seen = 0
    try:
        while stack:
            fd, entries, prefix = stack[-1]
            try:
                entry = next(entries, None)
            except OSError:  # the folder went bad under us: the rest of it is not listed
                entry = None
            if entry is None:
                _close(stack.pop())
                continue
            seen += 1
            if seen > MAX_SCANNED_ENTRIES:
                report.complete = False
                return
            path = prefix + entry.name
            if path == INTERNAL_DIR:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield path, st, fd, entry.name
            if not stat.S_ISDIR(st.st_mode):
                continue
            if len(stack) >= MAX_DEPTH:
                report.complete = False
                continue
            try:
                child = _scan(os.open(entry.name, DIR_FLAGS, dir_fd=fd))  # a link swapped in: refused
            except OSError:
                continue
            if child is not None:
                stack.append((*child, path + "/"))
    finally:
        for level in stack:
            _close(level)


def _scan(fd: int) -> tuple[int, Iterator[os.DirEntry[str]]] | None:
    try:
        return fd, os.scandir(fd)
    except OSError:
        os.close(fd)
        return None


def _close(level: Level) -> None:
    level[1].close()  # type: ignore[attr-defined]
    os.close(level[0])


def _clear_setid(parent: int, name: str, seen: os.stat_result) -> None:
    """Clear the set-ID bits of the regular file ``name`` in ``parent``,
    through a descriptor of the file itself (never a path through links)."""
    if not (stat.S_ISREG(seen.st_mode) and seen.st_mode & _SETID):
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    except OSError:  # unreadable to us: by name, not following a link either
        with suppress(OSError, ValueError, NotImplementedError):
            os.chmod(name, stat.S_IMODE(seen.st_mode) & ~_SETID, dir_fd=parent, follow_symlinks=False)
        return
    with suppress(OSError):  # not ours to change: nothing more the host can do
        try:
            st = os.fstat(fd)
            if stat.S_ISREG(st.st_mode) and st.st_mode & _SETID:
                os.fchmod(fd, stat.S_IMODE(st.st_mode) & ~_SETID)
        finally:
            os.close(fd)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _internal_parts(relative: str) -> tuple[str, ...]:
    parts = Path(relative).parts
    if not parts or parts[0] != INTERNAL_DIR or ".." in parts or len(parts) < 2:
        raise PathEscapeError(relative, f"is not under {INTERNAL_DIR}/")
    return parts
