"""Workspace: the directory a run reads and writes.

A given directory, or a temporary one removed on ``close()``. Every path a
caller or a model names is resolved inside it: absolute paths, ``..`` and
symlinks that lead outside are refused. ``snapshot()`` and ``changes()`` tell
which files a run created or changed, never following symlinks.

Layout: user files at the top; execbox's own files (code files of blocks
without a filename, host-defined functions) under ``.execbox/``, which the
change report leaves out.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ._errors import PathEscapeError, WorkspaceError

__all__ = ["FileInfo", "Workspace"]

INTERNAL_DIR = ".execbox"
# A run's change report stops looking after this many entries, so that a
# workspace pointed at a huge tree does not make every run slow.
MAX_SCANNED_ENTRIES = 20_000

Snapshot = dict[str, tuple[int, int, int]]


@dataclass(frozen=True)
class FileInfo:
    path: str
    size: int
    is_dir: bool


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

    def __enter__(self) -> Workspace:
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
        real = Path(os.path.realpath(candidate))
        if not _inside(real, self._root):
            raise PathEscapeError(text, "goes through a symlink that leads outside the workspace")
        if candidate.parts[len(self._root.parts):][:1] == (INTERNAL_DIR,):
            raise PathEscapeError(text, f"is inside execbox's own {INTERNAL_DIR}/ folder")
        return candidate

    def write_text(self, relative: str, text: str) -> Path:
        return self.write_bytes(relative, text.encode("utf-8"))

    def write_bytes(self, relative: str, data: bytes) -> Path:
        """Write a file inside the workspace; never through a symlink (at any
        level, checked while walking down, so a link swapped in meanwhile by
        running code is not followed either)."""
        target = self.resolve(relative)
        _write_under(self._root, target.relative_to(self._root).parts, data, relative, repair=False)
        return target

    def write_internal(self, relative: str, data: bytes) -> Path:
        """Write one of execbox's own files (under ``.execbox/``). A link or
        file that code planted where a folder belongs is removed, not
        followed."""
        parts = Path(relative).parts
        if not parts or parts[0] != INTERNAL_DIR or ".." in parts:
            raise PathEscapeError(relative, f"is not under {INTERNAL_DIR}/")
        _write_under(self._root, parts, data, relative, repair=True)
        return self._root.joinpath(*parts)

    # -- caller facets ------------------------------------------------------

    def upload(self, source: str | os.PathLike[str] | bytes, dest: str) -> Path:
        """Put a host file (a path) or bytes into the workspace at ``dest``."""
        if isinstance(source, bytes):
            return self.write_bytes(dest, source)
        return self.write_bytes(dest, Path(source).read_bytes())

    def download(self, relative: str, dest: str | os.PathLike[str] | None = None) -> bytes:
        """Read a workspace file (refusing symlinks); also copy it to ``dest``."""
        target = self.resolve(relative)
        *folders, name = target.relative_to(self._root).parts
        parent = _open_folders(self._root, folders, relative, create=False, repair=False)
        try:
            # O_NONBLOCK: a FIFO planted by the code must not hang us on open
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise PathEscapeError(relative, "is a symlink") from None
            raise WorkspaceError(f"cannot read {relative!r} in the workspace: {exc.strerror}") from None
        finally:
            os.close(parent)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise WorkspaceError(f"{relative!r} is not a regular file (a FIFO, socket or device): "
                                     "not read")
            data = handle.read()
        if dest is not None:
            Path(dest).write_bytes(data)
        return data

    def list(self, relative: str = ".") -> list[FileInfo]:
        """Files and folders under ``relative``, recursively, without
        following symlinks; execbox's own folder left out."""
        base = self._root if relative in (".", "") else self.resolve(relative)
        found: list[FileInfo] = []
        for path, st in _walk(base, self._root):
            found.append(FileInfo(path, st.st_size, stat.S_ISDIR(st.st_mode)))
        return sorted(found, key=lambda info: info.path)

    # -- change report ----------------------------------------------------

    def snapshot(self) -> Snapshot:
        """Identity of every regular file and symlink (not followed)."""
        return {
            path: (st.st_mtime_ns, st.st_size, st.st_ino)
            for path, st in _walk(self._root, self._root)
            if not stat.S_ISDIR(st.st_mode)
        }

    @staticmethod
    def changes(before: Snapshot, after: Snapshot) -> list[str]:
        """Paths created or changed between two snapshots."""
        return sorted(path for path, ident in after.items() if before.get(path) != ident)


def _walk(base: Path, root: Path):
    """(relative path, lstat) under ``base``; never follows a symlink."""
    stack = [base]
    seen = 0
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if seen > MAX_SCANNED_ENTRIES:
                return
            rel = os.path.relpath(entry.path, root)
            if rel == INTERNAL_DIR:
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield rel, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(Path(entry.path))


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _open_folders(root: Path, folders: list[str] | tuple[str, ...], given: str, *, create: bool,
                  repair: bool) -> int:
    """A descriptor of root/folders..., opened one level at a time without
    following links; missing folders made when ``create``; a link or file in
    the way removed when ``repair``, else refused."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
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
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    for _ in range(3):  # code running meanwhile may swap things in: a few tries, then give up
        try:
            return os.open(part, flags, dir_fd=parent)
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
            os.unlink(part, dir_fd=parent)
    raise WorkspaceError(f"cannot open {given!r} in the workspace: {part!r} keeps changing")


def _write_under(root: Path, parts: tuple[str, ...], data: bytes, given: str, *, repair: bool) -> None:
    *folders, name = parts
    parent = _open_folders(root, folders, given, create=True, repair=repair)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK
        try:
            fd = os.open(name, flags, 0o644, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP and repair:
                os.unlink(name, dir_fd=parent)
                fd = os.open(name, flags, 0o644, dir_fd=parent)
            elif exc.errno == errno.ELOOP:
                raise PathEscapeError(given, "is a symlink; execbox does not write through links") from None
            else:
                raise WorkspaceError(f"cannot write {given!r}: {exc.strerror}") from None
    finally:
        os.close(parent)
    with os.fdopen(fd, "wb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise WorkspaceError(f"{given!r} is not a regular file (a FIFO, socket or device): not written")
        handle.write(data)
