"""Who a jail is on the host, and how it reaches what it is shown.

bubblewrap started by root with ``--unshare-user`` maps the jail's user to
the host's root: every inode root owns that the jail can reach is then the
block's (a setuid-root shell left in the workspace, host device nodes
chmodded through ``--dev``, root-only files inside read-only binds read,
root's per-user kernel quotas such as inotify instances spent). So when
execbox runs as root, the jails of each executor run as a host uid and gid
of their own, taken from a range no account uses and leased for the
executor's life (``lease``): the jail owns nothing of the host's but its
workspace, and one tenant's quotas are not another's.

The range is ``EXECBOX_JAIL_IDS`` ("first:count"), by default 65,536 ids from
0x70000000 (above systemd's container ranges, below its foreign range). A
lease is an ``flock`` on a file under ``/run/execbox/jail-ids``, so two
executors, in one process or two, never share an id.

bwrap then runs unprivileged, as the jail id. Paths it must bind but cannot
reach as that id (an interpreter under root's 0700 home, a workspace under
a 0700 folder) are first bound, in a private mount namespace of the child,
onto staging folders it can reach (``Jailer``): no host permission changes.
Where root may not make a mount namespace (a container's root without
CAP_SYS_ADMIN), the closed folders give the jails' reach group search by
an ACL entry instead (``_acl``; the last id of the range, never leased).

A non-root host user cannot map the jail to anyone else (that takes
``newuidmap`` and ``/etc/subuid``): the jail is that user, and what it owns
on the host is what a block may change through the workspace (README,
"Security model").
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from .._errors import BackendUnavailableError, ConfigurationError
from ._acl import grant_search, mount_namespaces

__all__ = ["Jailer", "Lease", "give_pipe", "is_jail_id", "jail_id_range", "lease", "reach_group"]

DEFAULT_RANGE = (0x70000000, 65536)
LEASE_DIR = "/run/execbox/jail-ids"
CLONE_NEWNS = 0x00020000
MS_BIND, MS_REC, MS_SLAVE = 0x1000, 0x4000, 0x80000
_libc = ctypes.CDLL(None, use_errno=True)
_unshare, _mount, _setns = _libc.unshare, _libc.mount, _libc.setns  # called between fork and exec: made here


def jail_id_range() -> tuple[int, int]:
    """(first id, count) of the jails' host ids."""
    text = os.environ.get("EXECBOX_JAIL_IDS", "")
    if not text:
        return DEFAULT_RANGE
    first, _, count = text.partition(":")
    try:
        value = (int(first, 0), int(count or "65536", 0))
    except ValueError:
        value = (-1, -1)
    if value[0] < 1 or value[1] < 1 or value[0] + value[1] > 0xFFFFFFFE:
        raise ConfigurationError(
            f"EXECBOX_JAIL_IDS={text!r}: write it as FIRST:COUNT of host ids no account "
            "uses, e.g. 1879048192:65536"
        )
    return value


def reach_group() -> int:
    """The jails' shared group for reaching closed folders without a mount
    namespace (``_acl``): the last id of the range, which ``lease`` never gives."""
    first, count = jail_id_range()
    return first + count - 1


def is_jail_id(uid: int) -> bool:
    first, count = jail_id_range()
    return first <= uid < first + count


@dataclass
class Lease:
    """A host uid = gid held for one executor's jails until ``release``."""

    uid: int
    gid: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # the flock goes with it
            self._fd = -1


def lease() -> Lease | None:
    """A free jail id when this process is root, else None (the jail is this user)."""
    if os.geteuid() != 0:
        return None
    first, count = jail_id_range()
    usable = max(count - 1, 1)  # the last id is the reach group's
    folder = _lease_dir()
    start = secrets.randbelow(usable)
    for step in range(usable):
        uid = first + (start + step) % usable
        fd = os.open(
            os.path.join(folder, str(uid)), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                continue
            raise
        return Lease(uid, uid, fd)
    raise ConfigurationError(
        f"all {usable} jail ids of EXECBOX_JAIL_IDS are in use: close executors, or widen the range"
    )


def _lease_dir() -> str:
    """/run/execbox/jail-ids, or a root-owned folder in the temporary
    directory where /run cannot be written; a link or a folder someone else
    owns is refused."""
    for folder in (LEASE_DIR, os.path.join(tempfile.gettempdir(), "execbox-jail-ids-0")):
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
        except OSError:
            continue
        st = os.lstat(folder)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == 0 and not st.st_mode & 0o022:
            return folder
    raise ConfigurationError(
        f"cannot keep jail id leases: {LEASE_DIR} cannot be made, and the temporary "
        "directory's execbox-jail-ids-0 is not a folder of root's"
    )


def reachable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid:gid`` (no supplementary groups) may search every folder
    above ``path`` (its mode bits; ACLs are not read)."""
    for folder in Path(path).parents:
        try:
            st = os.stat(folder)
        except OSError:
            return False
        bit = 0o100 if st.st_uid == uid else 0o010 if st.st_gid == gid else 0o001
        if not st.st_mode & bit:
            return False
    return True


class Jailer:
    """What the child does as root between fork and the exec of bwrap.

    ``sources``: host paths bwrap binds. Those the jail id cannot reach get
    a staging folder (or file); ``source(path)`` is what to give bwrap, and
    ``enter`` (a preexec function) binds them there in a private mount
    namespace, then becomes the jail id. With no lease (not root) nothing is
    staged and ``enter`` does nothing.

    The staging mount namespace is made once, kept by a descriptor, and each
    child joins it (``setns``): made in every child, it cost the one-shot
    jail ~10 ms of wall time here, most of it the namespace's teardown after
    the block.

    Where root may make no mount namespace, nothing is staged: the closed
    folders above the sources give the reach group search (``_acl``), and
    the jail carries that group; where that cannot be done either,
    ``BackendUnavailableError`` says why (the Landlock tier may still run)."""

    def __init__(self, identity: Lease | None, sources: Sequence[str]) -> None:
        self.identity = identity
        self._stage = ""
        self._binds: list[tuple[bytes, bytes]] = []
        self._staged: dict[str, str] = {}
        self._mounts = -1  # the staging mount namespace, once made
        self._groups: list[int] = []  # the jail's supplementary groups: the reach group, or none
        if identity is None:
            return
        for path in dict.fromkeys(sources):
            if reachable(path, identity.uid, identity.gid):
                continue
            if not self._stage:
                self._stage = tempfile.mkdtemp(prefix="execbox-stage-")
                os.chmod(self._stage, 0o755)
            target = os.path.join(self._stage, str(len(self._staged)))
            if os.path.isdir(path):
                os.mkdir(target, 0o755)
            else:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            self._staged[path] = target
            self._binds.append((os.fsencode(path), os.fsencode(target)))
        if not self._binds:
            return
        try:
            if mount_namespaces():
                self._mounts = self._staging_namespace()
            else:
                self._reach_by_acl(identity)
        except BaseException:
            self.close()
            raise

    def _reach_by_acl(self, identity: Lease) -> None:
        """No mount namespace here: the closed folders give the reach group search."""
        paths = list(self._staged)
        why = grant_search(paths, identity.uid, identity.gid, reach_group())
        if why:
            raise BackendUnavailableError(
                "sandbox",
                f"the jail id (uid {identity.uid}) cannot reach {', '.join(paths)}, and root can neither "
                f"show them in a mount namespace here nor open the folders above them by an ACL ({why}): "
                "put the virtual environment and the workspace where others may search, or open the "
                "folders above them to others (chmod o+x)",
            )
        shutil.rmtree(self._stage, ignore_errors=True)
        self._stage, self._staged, self._binds = "", {}, []
        self._groups = [reach_group()]

    def _staging_namespace(self) -> int:
        """A descriptor of a mount namespace with the staging binds made, held
        by a child that leaves at once (the descriptor keeps the namespace)."""
        try:
            holder = subprocess.Popen(
                ["/bin/cat"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=self._stage_binds,
                close_fds=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise BackendUnavailableError(
                "sandbox", f"cannot stage the jail's bind sources in a mount namespace: {exc}"
            ) from None
        try:
            return os.open(f"/proc/{holder.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        finally:
            assert holder.stdin is not None
            holder.stdin.close()
            holder.wait()

    def _stage_binds(self) -> None:
        """In a child: a private mount namespace with the staging binds."""
        _check(_unshare(CLONE_NEWNS), "unshare a mount namespace")
        _check(_mount(b"none", b"/", None, MS_REC | MS_SLAVE, None), "make mounts private")
        for source, target in self._binds:
            _check(_mount(source, target, None, MS_BIND | MS_REC, None), "stage a bind source")

    def source(self, path: str) -> str:
        return self._staged.get(path, path)

    def enter(self) -> None:
        """In the child, before bwrap starts: system calls only."""
        if self.identity is None:
            return
        if self._mounts >= 0:
            cwd = os.getcwd()  # joining a mount namespace moves to its root
            _check(_setns(self._mounts, CLONE_NEWNS), "join the staging mount namespace")
            os.chdir(cwd)
        self.become()

    def become(self) -> None:
        """Become the jail id, with no supplementary group but the reach
        group where it is used (in a child).
        The output pipes become the jail's too: ``echo > /dev/stderr``
        opens the pipe again, and root's pipes are 0600."""
        if self.identity is None:
            return
        for fd in (1, 2):
            give_pipe(fd, self.identity)
        os.setgroups(self._groups)
        os.setresgid(self.identity.gid, self.identity.gid, self.identity.gid)
        os.setresuid(self.identity.uid, self.identity.uid, self.identity.uid)

    def then(self, first: Callable[[], None]) -> Callable[[], None]:
        """A preexec function running ``first`` (as root), then ``enter``."""

        def both() -> None:
            first()
            self.enter()

        return both

    def close(self) -> None:
        if self._mounts >= 0:
            os.close(self._mounts)
            self._mounts = -1
        if self._stage:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = ""


def give_pipe(fd: int, identity: Lease | None) -> None:
    """Make a pipe (or socket) the jail id's, so that the jail may open it
    again through /proc/self/fd or /dev/stdout; other files are left alone."""
    if identity is None:
        return
    try:
        if stat.S_ISFIFO(os.fstat(fd).st_mode) or stat.S_ISSOCK(os.fstat(fd).st_mode):
            os.fchown(fd, identity.uid, identity.gid)
    except OSError:
        pass


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"execbox jail: {what}: {os.strerror(err)}")
