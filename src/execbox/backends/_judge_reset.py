"""Each judged case in a fresh workspace (``Executor.judge`` with
``fresh_workspace=True``, the default): what the workspace held before the
first case is put back after each case.

Before the first case (after the program's build) the judge records the
workspace (``WorkspaceReset``): every folder, file and link of the user's
part, with each file's bytes (at most ``MAX_KEPT_BYTES`` in all, and
``MAX_SCANNED_ENTRIES`` entries: a larger workspace is refused, naming
``fresh_workspace=False``), and every entry of the ``.execbox/`` folders
the backend's blocks can write (``Executor._blocks_write_internal``: none
in the sandbox's namespaces tier, Docker's ``matplotlib`` and ``build``, all
of it in the Landlock tier and the local backend). After each case
(``reset``): an entry the case created is removed; a file, link or folder
of the user's part that it changed, removed or replaced is put back as it
was (bytes, mode, owner, modification time); in ``.execbox/`` an entry it
created or changed is removed, and a build it touched loses its mark (the
next case builds it again, in a clean folder). The program's processes
are gone by then (a block's end kills them), so nothing writes meanwhile.

Every step works from folder descriptors and never follows a link the
program planted. What cannot be put back raises ``WorkspaceError``: no
case runs in a workspace an earlier case left.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass, replace

from .._errors import ConfigurationError, WorkspaceError
from .._nofollow import DIR_FLAGS, open_folders
from .._workspace import INTERNAL_DIR, MAX_DEPTH, MAX_SCANNED_ENTRIES, Workspace

__all__ = ["MAX_KEPT_BYTES", "WorkspaceReset"]

MAX_KEPT_BYTES = 64 << 20  # the bytes of the user's files kept to put back
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_BUILD = "build"


@dataclass(frozen=True)
class _Entry:
    kind: str  # "dir", "file", "link" or "other" (a FIFO, a socket: compared, never made)
    mode: int
    uid: int
    gid: int
    size: int = 0
    mtime_ns: int = 0
    ino: int = 0
    data: bytes | None = None  # a user's file: its bytes, to put back
    target: str | None = None  # a link's

    def same(self, st: os.stat_result) -> bool:
        if (_kind(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid) != (
            self.kind,
            self.mode,
            self.uid,
            self.gid,
        ):
            return False
        return self.kind == "dir" or (st.st_size, st.st_mtime_ns, st.st_ino) == (
            self.size,
            self.mtime_ns,
            self.ino,
        )


@dataclass
class _Top:
    parts: tuple[str, ...]  # the folder, from the workspace's root
    keep: bool  # the user's part: put back; .execbox/'s: only removed
    entries: dict[str, _Entry]  # by path under the folder
    children: dict[str, list[str]]  # names in each folder ("" the top), as before the first case
    seen: int = 0


class WorkspaceReset:
    """The workspace as it was when this was made, put back by ``reset``
    (the module docstring). ``internal``: the ``.execbox/`` folders blocks
    can write (True: all of it; False: none)."""

    def __init__(self, workspace: Workspace, internal: bool | Sequence[str]) -> None:
        self.root = workspace.path
        self.kept = 0
        self.tops = [self._record((), keep=True)]
        if internal is True:
            self.tops.append(self._record((INTERNAL_DIR,), keep=False))
        elif internal:
            self.tops += [self._record((INTERNAL_DIR, folder), keep=False) for folder in internal]

    # -- before the first case ------------------------------------------------

    def _record(self, parts: tuple[str, ...], keep: bool) -> _Top:
        top = _Top(parts, keep, {}, {})
        try:
            fd = self._open(parts)
            try:
                self._record_folder(top, fd, "", 0)
            finally:
                os.close(fd)
        except OSError as exc:
            where = "/".join(parts) or "the workspace"
            raise WorkspaceError(f"cannot record {where} before the first judged case: {exc}") from None
        return top

    def _record_folder(self, top: _Top, fd: int, prefix: str, depth: int) -> None:
        names = top.children.setdefault(prefix, [])
        for name in _names(fd):
            if not top.parts and not prefix and name == INTERNAL_DIR:
                continue
            top.seen += 1
            if top.seen > MAX_SCANNED_ENTRIES or depth >= MAX_DEPTH:
                raise ConfigurationError(
                    f"judge(fresh_workspace=True) puts the workspace back after each case, and it holds "
                    f"more than {MAX_SCANNED_ENTRIES} entries (or folders {MAX_DEPTH} deep): judge in an "
                    "emptier workspace, or pass fresh_workspace=False (the cases then share it)"
                )
            path = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            entry = _Entry(
                _kind(st.st_mode),
                stat.S_IMODE(st.st_mode),
                st.st_uid,
                st.st_gid,
                st.st_size,
                st.st_mtime_ns,
                st.st_ino,
            )
            if entry.kind == "link":
                entry = replace(entry, target=os.readlink(name, dir_fd=fd))
            elif entry.kind == "file" and top.keep:
                entry = replace(entry, data=self._read(fd, name, path))
            top.entries[path] = entry
            names.append(name)
            if entry.kind == "dir":
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    self._record_folder(top, child, path + "/", depth + 1)
                finally:
                    os.close(child)

    def _read(self, fd: int, name: str, path: str) -> bytes:
        file = os.open(name, _FILE_FLAGS, dir_fd=fd)
        try:
            size = os.fstat(file).st_size
            if self.kept + size > MAX_KEPT_BYTES:
                raise ConfigurationError(
                    f"judge(fresh_workspace=True) keeps a copy of the workspace's files to put back after "
                    f"each case, at most {MAX_KEPT_BYTES >> 20} MiB, and they hold more ({path!r} among "
                    "them): judge in an emptier workspace, or pass fresh_workspace=False (the cases then "
                    "share it)"
                )
            data = b""
            while len(data) <= size:  # a file that grows meanwhile: what it held up to its size, and one more
                chunk = os.read(file, size + 1 - len(data))
                if not chunk:
                    break
                data += chunk
            self.kept += len(data)
            return data
        finally:
            os.close(file)

    # -- after each case ------------------------------------------------------

    def reset(self) -> None:
        """Put the workspace back as it was before the first case."""
        for top in self.tops:
            fd = self._open(top.parts)
            try:
                self._sync(top, fd, "")
            except OSError as exc:
                where = "/".join(top.parts) or "the workspace"
                raise WorkspaceError(
                    f"cannot put {where} back as it was before the first judged case ({exc}): the judge "
                    "stops rather than run a case in what the last one left"
                ) from None
            finally:
                os.close(fd)

    def _sync(self, top: _Top, fd: int, prefix: str) -> None:
        present = set()
        for name in _names(fd):
            if not top.parts and not prefix and name == INTERNAL_DIR:
                continue
            path = prefix + name
            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            entry = top.entries.get(path)
            if entry is not None and entry.kind == "dir" == _kind(st.st_mode):
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
                try:
                    if not entry.same(os.fstat(child)):
                        _own(child, entry)
                    self._sync(top, child, path + "/")
                finally:
                    os.close(child)
                present.add(name)
            elif entry is None or not entry.same(st):
                _remove(fd, name, st)
                self._unmark(top, path)
            else:
                present.add(name)
        if top.keep:
            for name in top.children.get(prefix, []):
                if name not in present:
                    self._put_back(top, fd, prefix + name, name)

    def _put_back(self, top: _Top, fd: int, path: str, name: str) -> None:
        entry = top.entries[path]
        if entry.kind == "dir":
            os.mkdir(name, 0o700, dir_fd=fd)
            child = os.open(name, DIR_FLAGS, dir_fd=fd)
            try:
                _own(child, entry)
                self._sync(top, child, path + "/")
            finally:
                os.close(child)
            return
        if entry.kind == "link":
            assert entry.target is not None
            os.symlink(entry.target, name, dir_fd=fd)
            if os.geteuid() == 0:
                os.chown(name, entry.uid, entry.gid, dir_fd=fd, follow_symlinks=False)
            os.utime(name, ns=(entry.mtime_ns, entry.mtime_ns), dir_fd=fd, follow_symlinks=False)
        elif entry.kind == "file":
            file = os.open(name, _NEW_FILE, 0o600, dir_fd=fd)
            try:
                data = memoryview(entry.data or b"")
                while data:
                    data = data[os.write(file, data) :]
                _own(file, entry)
                os.utime(file, ns=(entry.mtime_ns, entry.mtime_ns))
            finally:
                os.close(file)
        else:
            raise OSError(f"{path!r} was a FIFO or socket, which execbox does not make again")
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        top.entries[path] = replace(entry, ino=st.st_ino, mtime_ns=st.st_mtime_ns, size=st.st_size)

    def _unmark(self, top: _Top, path: str) -> None:
        """A build a case touched is built again by the next (its mark removed)."""
        parts = (*top.parts, *path.split("/"))
        if len(parts) > 3 and parts[:2] == (INTERNAL_DIR, _BUILD):
            folder = "/".join(parts[:3])
            try:
                parent = open_folders(self.root, parts[:3], folder, create=False, repair=False)
            except (WorkspaceError, OSError):
                return
            try:
                os.unlink(".built", dir_fd=parent)
            except OSError:
                pass
            finally:
                os.close(parent)

    def _open(self, parts: tuple[str, ...]) -> int:
        if not parts:
            return os.open(self.root, DIR_FLAGS)
        # a link planted where .execbox/ or its folder belongs: removed, never followed
        return open_folders(self.root, parts, "/".join(parts), create=True, repair=True)


def _names(fd: int) -> list[str]:
    with os.scandir(fd) as entries:
        return [entry.name for entry in entries]


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISREG(mode):
        return "file"
    return "link" if stat.S_ISLNK(mode) else "other"


def _own(fd: int, entry: _Entry) -> None:
    if os.geteuid() == 0:
        os.fchown(fd, entry.uid, entry.gid)
    os.fchmod(fd, entry.mode)


def _remove(parent: int, name: str, st: os.stat_result) -> None:
    """Remove what a case left at ``name``: a folder whole (opened up first
    where it closed folders to their owner), never following a link."""
    if not stat.S_ISDIR(st.st_mode):
        os.unlink(name, dir_fd=parent)
        return
    if os.geteuid() != 0:
        os.chmod(name, 0o700, dir_fd=parent)
        for _, dirs, _, fd in os.fwalk(name, dir_fd=parent, follow_symlinks=False):
            for sub in dirs:
                try:  # a folder, as fwalk (not following links) found it
                    os.chmod(sub, 0o700, dir_fd=fd)
                except OSError:
                    pass
    shutil.rmtree(name, dir_fd=parent)
