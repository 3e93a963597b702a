"""As root, paths the Landlock tier's jail id cannot reach, shown to it.

The Landlock tier (``_landlock_tier``) runs a block as the executor's leased
jail id (``_identity``). Where a folder above the workspace or the
interpreter is closed to that id (an interpreter under /root), the child
shows the needed paths at their own place in a private mount namespace: a
tmpfs over each closed folder, with the paths bound in (``open_tree`` and
``move_mount``). Root outside a container may make one; where it may not,
the block's start fails and ``Reach.step`` says which folders to open.

Everything the child does here is system calls only (it runs between fork
and exec); what they need is prepared in the parent.
"""

from __future__ import annotations

import ctypes
import errno
import os
from collections.abc import Sequence
from pathlib import Path

from ...jail import Lease, reachable

__all__ = ["Reach", "check", "private_mounts", "reach_supported"]

CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_REC, MS_SLAVE = 0x2, 0x4, 0x4000, 0x80000
OPEN_TREE_CLONE, AT_RECURSIVE, AT_FDCWD, MOVE_MOUNT_F_EMPTY_PATH = 1, 0x8000, -100, 0x4
_SYSCALLS = {
    "x86_64": {"open_tree": 428, "move_mount": 429},
    "aarch64": {"open_tree": 428, "move_mount": 429},
}
_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall  # called between fork and exec: made here, not there
_syscall.restype = ctypes.c_long
_unshare, _mount = _libc.unshare, _libc.mount


def reach_supported() -> bool:
    """This architecture's system call numbers are known."""
    return os.uname().machine in _SYSCALLS


def check(result: int, what: str) -> None:
    """Raise ``OSError`` (with errno) for a libc call that returned non-zero."""
    if result != 0:
        err = ctypes.get_errno() or errno.EPERM
        raise OSError(err, f"{what}: {os.strerror(err)}")


def private_mounts() -> int:
    """In the child, as root: a mount namespace of its own, whose mounts do
    not reach the host's. 0, or the errno (a container's root without
    CAP_SYS_ADMIN may not make one)."""
    if _unshare(CLONE_NEWNS) != 0 or _mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
        return ctypes.get_errno() or errno.EPERM
    return 0


class Reach:
    """As root: shows paths the jail id cannot reach (a closed folder above
    them) at their own place, in a private mount namespace of the child: a
    tmpfs over each closed folder, with the needed paths bound in."""

    def __init__(self, paths: Sequence[str], lease: Lease, workspace: str) -> None:
        self.paths: list[tuple[bytes, bool]] = []
        self.tops: list[bytes] = []
        self.dirs: list[bytes] = []
        self.workspace = os.fsencode(workspace)
        needed = [p for p in dict.fromkeys(paths) if not reachable(p, lease.uid, lease.gid)]
        needed = [p for p in needed if not any(p != q and p.startswith(q + "/") for q in needed)]
        for path in needed:
            top = next(str(f) for f in reversed(Path(path).parents) if not _searchable(str(f), lease))
            if not any(top == t or top.startswith(t + "/") for t in map(os.fsdecode, self.tops)):
                self.tops = [t for t in self.tops if not os.fsdecode(t).startswith(top + "/")]
                self.tops.append(os.fsencode(top))
            self.paths.append((os.fsencode(path), os.path.isdir(path)))
        for shown_path, _ in self.paths:
            folder = Path(os.fsdecode(shown_path)).parent
            chain = []
            while os.fsencode(str(folder)) not in self.tops and str(folder) != "/":
                chain.append(os.fsencode(str(folder)))
                folder = folder.parent
            self.dirs += [d for d in reversed(chain) if d not in self.dirs]
        self.numbers = _SYSCALLS.get(os.uname().machine, {})
        shown = ", ".join(os.fsdecode(p) for p, _ in self.paths)
        self.step = (
            f"show {shown} to the jail id (uid {lease.uid}), which cannot reach them, in a mount namespace "
            f"(where none can be made, open the folders above them to others: chmod o+x "
            f"{', '.join(map(os.fsdecode, self.tops))}; or use a workspace and interpreter outside)"
        )

    def __bool__(self) -> bool:
        return bool(self.paths)

    def enter(self) -> None:
        """In the child, as root: system calls only."""
        check(_unshare(CLONE_NEWNS), "unshare a mount namespace")
        check(_mount(None, b"/", None, MS_REC | MS_SLAVE, None), "make mounts private")
        self.show()

    def show(self) -> None:
        """``enter`` in a mount namespace the child made already (``private_mounts``)."""
        trees = []
        for path, _ in self.paths:
            fd = _syscall(
                self.numbers["open_tree"], AT_FDCWD, path, OPEN_TREE_CLONE | AT_RECURSIVE | os.O_CLOEXEC
            )
            check(0 if fd >= 0 else -1, "clone a mount of " + os.fsdecode(path))
            trees.append(int(fd))
        for top in self.tops:
            check(
                _mount(b"tmpfs", top, b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"), "mount a tmpfs"
            )
        for folder in self.dirs:
            try:
                os.mkdir(folder, 0o755)
            except FileExistsError:
                pass
            os.chmod(folder, 0o755)
        for (path, is_dir), fd in zip(self.paths, trees, strict=True):
            if is_dir:
                os.mkdir(path, 0o755)
            else:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644))
            check(
                _syscall(self.numbers["move_mount"], fd, b"", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH),
                "bind " + os.fsdecode(path),
            )
            os.close(fd)
        os.chdir(self.workspace)


def _searchable(folder: str, lease: Lease) -> bool:
    try:
        st = os.stat(folder)
    except OSError:
        return False
    bit = 0o100 if st.st_uid == lease.uid else 0o010 if st.st_gid == lease.gid else 0o001
    return bool(st.st_mode & bit)
