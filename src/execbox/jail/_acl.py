"""As root where no mount namespace can be made, closed folders opened to
the jails by a POSIX ACL entry that grants search alone.

When execbox runs as root its jails run as a leased host id (``_identity``).
An interpreter under a closed folder (a virtual environment under root's
0700 home: a checkout cloned into /root) is unreachable to that id. Root
outside a container shows such paths to the jail in a private mount
namespace (``Jailer``'s staging binds, ``_reach``), with no host permission
changed. A container's root without CAP_SYS_ADMIN (``docker run`` with the
engine's defaults) cannot make a mount namespace, so there:

- the last id of ``EXECBOX_JAIL_IDS`` is the jails' *reach group*
  (``_identity.reach_group``): it is never leased, no account has it, and the jails of every executor carry it
  as their one supplementary group (files they make still take their own
  gid);
- each closed root-owned folder above a path the jail needs gets one ACL
  entry, ``group:<reach group>:--x``: search, never list nor read. The mask
  is widened by search alone, so the folder's owning group gains nothing.

The entry stays: it is the same for every executor (no lease is written in
a folder, so there is nothing to clean up after a crash), and it opens the
folder to no process but the jails'. The jails stay confined by their tier
(bubblewrap shows them only what it binds; Landlock refuses every path
outside the system folders, the interpreter and the workspace), so search
on /root gives a block none of root's files. A folder another user owns is
never changed: its owner closed it, and the caller's error says which.
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import struct
import subprocess
from collections.abc import Iterable
from pathlib import Path

__all__ = ["closed_folders", "grant_search", "mount_namespaces"]

XATTR = "system.posix_acl_access"
VERSION = 2
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
UNDEFINED = 0xFFFFFFFF
SEARCH = 1
CLONE_NEWNS = 0x00020000


@functools.cache
def mount_namespaces() -> bool:
    """Whether this process (root) may make a mount namespace: tried once in
    a child (a container's root without CAP_SYS_ADMIN may not)."""
    if os.geteuid() != 0:
        return False
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    unshare = libc.unshare

    def enter() -> None:
        if unshare(CLONE_NEWNS) != 0:
            raise OSError(ctypes.get_errno(), "unshare")

    try:
        subprocess.run(["/bin/true"], preexec_fn=enter, close_fds=True, timeout=30, check=True)
    except (OSError, subprocess.SubprocessError):
        return False
    return True


def closed_folders(paths: Iterable[str], uid: int, gid: int) -> list[str]:
    """The folders above ``paths`` that ``uid:gid`` (no other group) may not
    search by their mode bits, outermost first."""
    found: list[str] = []
    for path in paths:
        for folder in reversed(Path(path).parents):
            name = str(folder)
            if name in found:
                continue
            try:
                st = os.stat(name)
            except OSError:
                continue
            bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
            if not st.st_mode & bit:
                found.append(name)
    return found


def grant_search(paths: Iterable[str], uid: int, gid: int, group: int) -> str:
    """Give ``group`` (the reach group) search on every closed folder above
    ``paths`` (as the jail ``uid:gid`` sees them). "" when done, else why
    not (a folder root does not own, a file system without ACLs). Every
    folder is checked before any is changed: a refusal leaves all as they were."""
    opened: list[tuple[str, int, bytes]] = []
    try:
        for folder in closed_folders(paths, uid, gid):
            try:
                fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError as exc:
                return f"{folder}: {exc.strerror}"
            opened.append((folder, fd, b""))
            st = os.fstat(fd)
            if st.st_uid != 0 or not stat.S_ISDIR(st.st_mode):
                return f"{folder} is closed to the jail id and owned by uid {st.st_uid}, not root"
            try:
                opened[-1] = (folder, fd, _with_search(_entries(fd, st.st_mode), group))
            except (OSError, ValueError) as exc:
                return f"cannot add an ACL entry to {folder}: {getattr(exc, 'strerror', None) or exc}"
        for folder, fd, acl in opened:
            try:
                os.setxattr(fd, XATTR, acl)
            except OSError as exc:
                return f"cannot add an ACL entry to {folder}: {exc.strerror}"
        return ""
    finally:
        for _, fd, _ in opened:
            os.close(fd)


def _entries(fd: int, mode: int) -> list[tuple[int, int, int]]:
    """The folder's ACL as (tag, permissions, id); from its mode bits where it has none."""
    try:
        data = os.getxattr(fd, XATTR)
    except OSError as exc:
        if exc.errno not in (errno.ENODATA, errno.EOPNOTSUPP):
            raise
        return [
            (USER_OBJ, (mode >> 6) & 7, UNDEFINED),
            (GROUP_OBJ, (mode >> 3) & 7, UNDEFINED),
            (OTHER, mode & 7, UNDEFINED),
        ]
    (version,) = struct.unpack_from("<I", data)
    if version != VERSION or (len(data) - 4) % 8:
        raise OSError(errno.EINVAL, f"an ACL of version {version}")
    return [struct.unpack_from("<HHI", data, offset) for offset in range(4, len(data), 8)]


def _with_search(entries: list[tuple[int, int, int]], group: int) -> bytes:
    """``entries`` with search added for ``group`` (and to the mask)."""
    named = {(tag, qid): perm for tag, perm, qid in entries if tag in (USER, GROUP)}
    named[(GROUP, group)] = named.get((GROUP, group), 0) | SEARCH
    plain = {tag: perm for tag, perm, _ in entries if tag not in (USER, GROUP)}
    mask = plain.get(MASK)
    if mask is not None and not mask & SEARCH:
        others = [perm for key, perm in named.items() if key != (GROUP, group)] + [plain[GROUP_OBJ]]
        if any(perm & SEARCH for perm in others):
            raise ValueError("its ACL mask withholds search from other entries, which widening would grant")
    # no mask yet: the owning group's permissions, as the mode bits showed them, plus search
    plain[MASK] = (plain[GROUP_OBJ] if mask is None else mask) | SEARCH
    rows = [(tag, perm, UNDEFINED) for tag, perm in plain.items()]
    rows += [(tag, perm, qid) for (tag, qid), perm in named.items()]
    rows.sort(key=lambda row: (row[0], row[2]))
    return struct.pack("<I", VERSION) + b"".join(struct.pack("<HHI", *row) for row in rows)
