"""The Landlock tier's child between fork and exec, where it may make
system calls only (``_landlock_tier.py`` prepares everything before): the
steps that confine it (``entry``: its cgroup, rlimits, the jail id, a
mount namespace with its own /dev/shm, capabilities dropped, a session
keyring of its own, Landlock, seccomp), the libc functions they call, bound
here once and never in the child, and the sweep that kills every process of
the jail id (``kill_all_as``).
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
from collections.abc import Callable, Sequence
from typing import Any

from ...jail import Lease, give_pipe
from ...jail import landlock as ll
from ._reach import Reach, check, private_mounts

__all__ = ["SYSCALLS", "SockFprog", "entry", "kill_all_as"]

MS_BIND = 0x1000
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 1, 24, 22, 2
KEYCTL_GET_KEYRING_ID, KEYCTL_JOIN_SESSION_KEYRING, KEY_SPEC_SESSION_KEYRING = 0, 1, -3
SYSCALLS = {"x86_64": {"keyctl": 250, "capset": 126}, "aarch64": {"keyctl": 219, "capset": 91}}
_libc = ctypes.CDLL(None, use_errno=True)
_syscall = _libc.syscall  # called between fork and exec: made here, not there
_syscall.restype = ctypes.c_long
_prctl, _mount = _libc.prctl, _libc.mount


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def entry(
    *,
    ruleset: int,
    procs: Sequence[int],
    status: int,
    limits: list[tuple[int, int]],
    lease: Lease | None,
    reach: Reach | None,
    groups: list[int],
    fprog: SockFprog | None,
    shm_source: bytes | None,
    shm_target: bytes | None,
    keyctl: int,
    capset: int,
    cap_header: Any,
    cap_data: Any,
    last_cap: int,
) -> Callable[[], None]:
    """The child's preexec function: each step, and on a failure the step's
    name written to ``status`` (the parent reads it) before raising."""

    def enter() -> None:  # in the child, before the exec: system calls only
        step = "join the block's cgroup"
        try:
            for fd in procs:
                os.write(fd, b"0")
            step = "set rlimits"
            for which, value in limits:
                resource.setrlimit(which, (value, value))
            if lease is not None:
                step = "make a mount namespace of its own"
                err = private_mounts()
                if reach:
                    step = reach.step
                    if err:
                        raise OSError(err, f"unshare a mount namespace: {os.strerror(err)}")
                    reach.show()
                if not err and shm_source is not None:  # else no /dev/shm: the host's is not granted
                    step = "bind its own /dev/shm"
                    check(_mount(shm_source, shm_target, None, MS_BIND, None), "bind a folder at /dev/shm")
                step = "drop privileges to the jail id"
                for cap in range(last_cap + 1):
                    check(_prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), "drop a bounding capability")
                for fd in (1, 2):
                    give_pipe(fd, lease)
                os.setgroups(groups)
                os.setresgid(lease.gid, lease.gid, lease.gid)
                os.setresuid(lease.uid, lease.uid, lease.uid)
            step = "drop capabilities"
            check(_syscall(capset, cap_header, cap_data), "capset")
            step = "join a session keyring of its own"
            join_own_keyring(keyctl)
            check(_prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "parent-death signal")
            step = "restrict itself with Landlock"
            err = ll.restrict_self(ruleset)
            if err:
                raise OSError(err, os.strerror(err))
            if fprog is not None:
                step = "load the seccomp filter"
                check(_prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")
        except OSError as exc:
            os.write(status, f"{step}: {exc.strerror or exc}".encode(errors="replace"))
            raise

    return enter


def kill_all_as(lease: Lease) -> Callable[[], None]:
    """A preexec function: become the jail id, then SIGKILL every process
    it may signal (``kill(-1)``: one pass, the kernel holding forks off;
    all of the jail id's but this one)."""
    uid, gid = lease.uid, lease.gid

    def sweep() -> None:  # in the child, before it execs true: system calls only
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:  # none left
            pass

    return sweep


def join_own_keyring(keyctl: int) -> None:
    """Join a new session keyring, so that the block possesses none of the
    host's keys (between fork and exec: system calls only).

    Where keyctl itself is refused, the block could not reach the host's keys
    either, so there is nothing to leave: EPERM from a seccomp filter (Docker's
    default profile refuses keyctl, add_key and request_key), which the block
    inherits and cannot remove, or ENOSYS (a kernel without keys). Only then:
    reading the session keyring's id must be refused the same way, else (a
    filter that refused joining alone, a kernel that ran out of keys) the
    error stands and the block does not start."""
    if _syscall(keyctl, KEYCTL_JOIN_SESSION_KEYRING, None) >= 0:
        return
    err = ctypes.get_errno()
    if err in (errno.EPERM, errno.ENOSYS) and (
        _syscall(keyctl, KEYCTL_GET_KEYRING_ID, ctypes.c_long(KEY_SPEC_SESSION_KEYRING), ctypes.c_long(0)) < 0
        and ctypes.get_errno() == err
    ):
        return
    raise OSError(err, f"keyctl: {os.strerror(err)}")
