"""The Landlock binding: which ABI the kernel has, a ruleset for given
paths, and restricting the calling process with it.

Landlock (Linux 5.13+) lets an unprivileged process confine itself and
everything it starts, with no namespace: a file is opened only under a path
a rule grants, with the rights the rule names. Later ABIs handle more:

======  =====  =========================================================
ABI     Linux  adds
======  =====  =========================================================
1       5.13   the filesystem rights (execute, read, write, make, remove)
2       5.19   REFER: linking or renaming a file into another folder
3       6.2    TRUNCATE
4       6.7    TCP bind and connect (``handled_access_net``)
5       6.10   IOCTL_DEV: ioctl on device files
6       6.12   scopes: signals and abstract unix sockets stay in the domain
7       6.15   audit logging flags (not used here)
======  =====  =========================================================

A right the kernel does not know is dropped from the ruleset (the process
is then allowed it, as it was before Landlock). Whatever the ABI, Landlock
also refuses ``ptrace`` of a process outside the domain, and with it
``/proc/<pid>/environ``, ``root``, ``cwd``, ``fd`` and ``mem`` of such a
process. It does not mediate ``connect()`` to a pathname unix socket, nor
``stat`` of a path.

``create_ruleset`` runs in the parent (it allocates); ``restrict_self``
runs between fork and exec (two system calls).
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from collections.abc import Iterable

__all__ = [
    "EXECUTE",
    "FILE_RIGHTS",
    "IOCTL_DEV",
    "READ",
    "READ_FILE",
    "SHARED_MEMORY",
    "TRUNCATE",
    "WRITE",
    "WRITE_FILE",
    "LandlockError",
    "abi",
    "create_ruleset",
    "restrict_self",
    "unavailable_reason",
]

# landlock_create_ruleset, landlock_add_rule, landlock_restrict_self: the same on both
_NUMBERS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

# handled_access_fs bits
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
# handled_access_net bits (ABI 4)
BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1
# scoped bits (ABI 6)
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1

# every filesystem right each ABI knows
_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 4: (1 << 15) - 1, 5: (1 << 16) - 1}
# the rights a rule on a file (not a folder) may carry
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
# convenient sets for callers
READ = READ_FILE | READ_DIR
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
# what POSIX shared memory and semaphores need of their folder (shm_open, sem_open: a file
# made, opened, sized, linked to its name beside it, removed); not a FIFO, a socket, a
# symbolic link, a folder, a device node, nor a link or rename from another folder (REFER)
SHARED_MEMORY = READ_FILE | READ_DIR | WRITE_FILE | MAKE_REG | REMOVE_FILE | TRUNCATE

_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall  # called between fork and exec: made here, not there
_syscall.restype = ctypes.c_long
_prctl = _libc.prctl


class LandlockError(OSError):
    """A Landlock system call failed."""


def _numbers() -> tuple[int, int, int] | None:
    return _NUMBERS.get(platform.machine())


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (too old,
    built without it, or Landlock not among the active security modules)."""
    numbers = _numbers()
    if numbers is None:
        return 0
    version = _syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return max(int(version), 0)


def unavailable_reason() -> str | None:
    """Why this kernel cannot confine with Landlock (None: it can)."""
    numbers = _numbers()
    if numbers is None:
        return f"no Landlock system call numbers for the {platform.machine()} architecture"
    version = _syscall(numbers[0], None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    if version > 0:
        return None
    err = ctypes.get_errno()
    if err == errno.ENOSYS:
        return "the kernel has no Landlock (Linux 5.13+ built with CONFIG_SECURITY_LANDLOCK)"
    if err == errno.EOPNOTSUPP:
        return (
            "Landlock is built in but not enabled: add landlock to the kernel's lsm= boot parameter "
            "(see /sys/kernel/security/lsm)"
        )
    return f"landlock_create_ruleset failed: {os.strerror(err)}"


def create_ruleset(
    rules: Iterable[tuple[str, int]], *, deny_tcp: bool, scoped: bool, version: int | None = None
) -> int:
    """A ruleset descriptor (close-on-exec) granting each ``(path, rights)``
    and nothing else on the filesystem; the rights of a file are cut to
    ``FILE_RIGHTS``, a missing path is skipped. ``deny_tcp``: refuse TCP
    bind and connect (ABI 4+); ``scoped``: keep signals and abstract unix
    sockets inside the domain (ABI 6+). Rights the kernel's ABI does not
    know are dropped: the caller sees which were held with ``version``."""
    numbers = _numbers()
    version = abi() if version is None else version
    if numbers is None or version < 1:
        raise LandlockError(errno.ENOSYS, unavailable_reason() or "no Landlock")
    handled_fs = _FS_BY_ABI.get(version, _FS_BY_ABI[5])
    handled_net = BIND_TCP | CONNECT_TCP if deny_tcp and version >= 4 else 0
    scopes = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if scoped and version >= 6 else 0
    attr = struct.pack("=QQQ", handled_fs, handled_net, scopes)
    size = 8 if version < 4 else 16 if version < 6 else 24
    fd = _syscall(numbers[0], ctypes.c_char_p(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if fd < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"landlock_create_ruleset: {os.strerror(err)}")
    fd = int(fd)
    try:
        os.set_inheritable(fd, False)
        for path, rights in rules:
            _add_path(numbers[1], fd, path, rights & handled_fs)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _add_path(number: int, ruleset: int, path: str, rights: int) -> None:
    try:
        parent = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return
    try:
        if not os.path.isdir(f"/proc/self/fd/{parent}"):
            rights &= FILE_RIGHTS
        if not rights:
            return
        attr = struct.pack("=Qi", rights, parent)  # struct landlock_path_beneath_attr is packed
        if (
            _syscall(
                number,
                ctypes.c_int(ruleset),
                ctypes.c_int(RULE_PATH_BENEATH),
                ctypes.c_char_p(attr),
                ctypes.c_uint32(0),
            )
            != 0
        ):
            err = ctypes.get_errno()
            raise LandlockError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
    finally:
        os.close(parent)


def restrict_self(ruleset: int) -> int:
    """Confine this process (and what it starts) with ``ruleset``: sets
    no_new_privs first, as Landlock requires of an unprivileged process.
    Between fork and exec: system calls only. Returns 0, or the errno."""
    if _prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        return ctypes.get_errno()
    numbers = _NUMBERS_HERE
    if numbers is None or _syscall(numbers[2], ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
        return ctypes.get_errno() or errno.ENOSYS
    return 0


_NUMBERS_HERE = _numbers()
