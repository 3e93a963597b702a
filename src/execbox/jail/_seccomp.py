"""A seccomp filter for sandboxed code, built as classic BPF by hand.

Denied with EPERM: system calls a sandboxed program has no business making
and that widen the kernel's attack surface (ptrace, mount and the new mount
API, bpf, keyctl, perf_event_open, kernel modules, kexec, namespaces
(``unshare``, ``setns``, ``clone`` with namespace flags), io_uring,
userfaultfd, cross-process memory access, clocks, swap, reboot...).
``clone3`` answers ENOSYS so that the C library falls back to ``clone``,
whose flags the filter can read. A mode with the setuid or setgid bit is
refused (EPERM) to chmod, fchmod, fchmodat(2), open, openat, creat, mknod and
mknodat: a block cannot leave a set-id program in the workspace, where a host
user could run it (the host also strips such bits after each run);
``openat2``, whose mode sits in a struct the filter cannot read, answers
ENOSYS (callers fall back to openat). A foreign architecture (the x32 ABI, or a
32-bit entry) is refused the same way.

Two options for a sandbox that has no namespaces of its own (the Landlock
tier): ``unix_sockets_only`` refuses ``socket()`` for every family but
AF_UNIX (IPv4, IPv6, packet, netlink, vsock...: the host's network
namespace is the block's); ``no_unix_streams`` refuses AF_UNIX stream and
seqpacket sockets (with the host's filesystem in view, a block would
``connect()`` to any pathname socket its uid may open: a session D-Bus, the
Docker socket; Landlock does not mediate ``connect``); ``socketpair`` stays
allowed, and so do datagram sockets; ``also_denied`` names more system calls
to refuse (``HOST_IPC``: SysV IPC and POSIX message queues, which are the
host's without an IPC namespace; ``NAME_WATCHES``: inotify and fanotify, which
Landlock does not mediate: a watch on a host folder the block may not list,
such as /tmp or /dev/shm, would name the files made in it).

The program is plain bytes (``struct sock_filter[]``): bubblewrap takes it
with ``--seccomp FD``, the sandbox's zygote loads it with ``prctl``.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Sequence

__all__ = [
    "DENIED",
    "HOST_IPC",
    "NAME_WATCHES",
    "SET_ID_BITS",
    "ZYGOTE_ALLOWED",
    "filter_program",
    "supported",
]

SET_ID_BITS = 0o6000  # S_ISUID | S_ISGID
# what the pool's zygote needs of DENIED: a unit's namespaces, its /tmp, and the way back
ZYGOTE_ALLOWED = ("unshare", "setns", "mount")

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "fanotify_init",
    "lookup_dcookie",
    "keyctl",
    "add_key",
    "request_key",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "sethostname",
    "setdomainname",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "iopl",
    "ioperm",
)
# SysV IPC and POSIX message queues: global unless the sandbox has an IPC namespace
HOST_IPC = (
    "shmget",
    "shmat",
    "shmctl",
    "shmdt",
    "semget",
    "semop",
    "semctl",
    "semtimedop",
    "msgget",
    "msgsnd",
    "msgrcv",
    "msgctl",
    "mq_open",
    "mq_unlink",
    "mq_timedsend",
    "mq_timedreceive",
    "mq_notify",
    "mq_getsetattr",
)
# inotify and fanotify: a watch needs only read permission on the folder (its
# mode bits), which Landlock does not check, and each event names the file
NAME_WATCHES = ("inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_init", "fanotify_mark")
AF_UNIX = 1
SOCK_DGRAM, SOCK_TYPE_MASK = 2, 0xF  # the type argument also carries SOCK_CLOEXEC and SOCK_NONBLOCK

_X86_64 = {
    "ptrace": 101,
    "process_vm_readv": 310,
    "process_vm_writev": 311,
    "kcmp": 312,
    "pidfd_getfd": 438,
    "mount": 165,
    "umount2": 166,
    "pivot_root": 155,
    "chroot": 161,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_by_handle_at": 304,
    "name_to_handle_at": 303,
    "unshare": 272,
    "setns": 308,
    "bpf": 321,
    "perf_event_open": 298,
    "userfaultfd": 323,
    "fanotify_init": 300,
    "lookup_dcookie": 212,
    "keyctl": 250,
    "add_key": 248,
    "request_key": 249,
    "init_module": 175,
    "finit_module": 313,
    "delete_module": 176,
    "kexec_load": 246,
    "kexec_file_load": 320,
    "reboot": 169,
    "swapon": 167,
    "swapoff": 168,
    "syslog": 103,
    "acct": 163,
    "quotactl": 179,
    "settimeofday": 164,
    "clock_settime": 227,
    "clock_adjtime": 305,
    "adjtimex": 159,
    "sethostname": 170,
    "setdomainname": 171,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "iopl": 172,
    "ioperm": 173,
    "clone": 56,
    "clone3": 435,
    "openat2": 437,
    "socket": 41,
    "shmget": 29,
    "shmat": 30,
    "shmctl": 31,
    "shmdt": 67,
    "semget": 64,
    "semop": 65,
    "semctl": 66,
    "semtimedop": 220,
    "msgget": 68,
    "msgsnd": 69,
    "msgrcv": 70,
    "msgctl": 71,
    "mq_open": 240,
    "mq_unlink": 241,
    "mq_timedsend": 242,
    "mq_timedreceive": 243,
    "mq_notify": 244,
    "mq_getsetattr": 245,
    "truncate": 76,
    "inotify_init": 253,
    "inotify_add_watch": 254,
    "inotify_init1": 294,
    "fanotify_mark": 301,
}
# system call -> index of its mode argument
_X86_64_MODES = {90: 1, 91: 1, 268: 2, 452: 2, 2: 2, 257: 3, 85: 1, 133: 1, 259: 2}
_AARCH64 = {
    "ptrace": 117,
    "process_vm_readv": 270,
    "process_vm_writev": 271,
    "kcmp": 272,
    "pidfd_getfd": 438,
    "mount": 40,
    "umount2": 39,
    "pivot_root": 41,
    "chroot": 51,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "mount_setattr": 442,
    "open_by_handle_at": 265,
    "name_to_handle_at": 264,
    "unshare": 97,
    "setns": 268,
    "bpf": 280,
    "perf_event_open": 241,
    "userfaultfd": 282,
    "fanotify_init": 262,
    "lookup_dcookie": 18,
    "keyctl": 219,
    "add_key": 217,
    "request_key": 218,
    "init_module": 105,
    "finit_module": 273,
    "delete_module": 106,
    "kexec_load": 104,
    "kexec_file_load": 294,
    "reboot": 142,
    "swapon": 224,
    "swapoff": 225,
    "syslog": 116,
    "acct": 89,
    "quotactl": 60,
    "settimeofday": 170,
    "clock_settime": 112,
    "clock_adjtime": 266,
    "adjtimex": 171,
    "sethostname": 161,
    "setdomainname": 162,
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "clone": 220,
    "clone3": 435,
    "openat2": 437,
    "socket": 198,
    "mq_open": 180,
    "mq_unlink": 181,
    "mq_timedsend": 182,
    "mq_timedreceive": 183,
    "mq_notify": 184,
    "mq_getsetattr": 185,
    "msgget": 186,
    "msgctl": 187,
    "msgrcv": 188,
    "msgsnd": 189,
    "semget": 190,
    "semctl": 191,
    "semtimedop": 192,
    "semop": 193,
    "shmget": 194,
    "shmctl": 195,
    "shmat": 196,
    "shmdt": 197,
    "truncate": 45,
    "inotify_init1": 26,
    "inotify_add_watch": 27,
    "fanotify_mark": 263,
}
_AARCH64_MODES = {52: 1, 53: 2, 452: 2, 56: 3, 33: 2}
# system calls an architecture never had (aarch64 has inotify_init1 only): nothing to refuse there
_NEVER_HAD = {"x86_64": frozenset(), "aarch64": frozenset({"inotify_init"})}
# machine -> (AUDIT_ARCH_*, syscall numbers, lowest number of a foreign ABI or None, mode arguments)
_ARCHES = {
    "x86_64": (0xC000003E, _X86_64, 0x40000000, _X86_64_MODES),
    "aarch64": (0xC00000B7, _AARCH64, None, _AARCH64_MODES),
}

_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_AND = 0x54  # BPF_ALU | BPF_AND | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_KILL_PROCESS = 0x80000000
_ERRNO = 0x00050000
# CLONE_NEWTIME | NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_CLONE_NAMESPACES = (
    0x00000080 | 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
)


def supported(machine: str | None = None) -> bool:
    return (machine or platform.machine()) in _ARCHES


def filter_program(
    machine: str | None = None,
    *,
    unix_sockets_only: bool = False,
    no_unix_streams: bool = False,
    also_denied: Sequence[str] = (),
    allowed: Sequence[str] = (),
) -> bytes:
    """The filter for this machine's architecture, as ``struct sock_filter[]``.
    ``unix_sockets_only``: ``socket()`` of any family but AF_UNIX answers
    EPERM; ``no_unix_streams``: so does ``socket()`` of an AF_UNIX stream or
    seqpacket socket; ``also_denied``: more system calls (by name) that
    answer EPERM; ``allowed``: system calls of ``DENIED`` let through (the
    pool's zygote makes namespaces and mounts for its units)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise ValueError(f"no seccomp filter for the {machine} architecture")
    arch, numbers, foreign, modes = _ARCHES[machine]
    unknown = [name for name in also_denied if name not in numbers and name not in _NEVER_HAD[machine]]
    if unknown:
        raise ValueError(f"no {machine} system call numbers for {', '.join(unknown)}")
    eperm, enosys = _ERRNO | errno.EPERM, _ERRNO | errno.ENOSYS
    prog = [
        (_LD_ABS, 0, 0, 4),  # seccomp_data.arch
        (_JEQ, 1, 0, arch),
        (_RET, 0, 0, _KILL_PROCESS),
        (_LD_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if foreign is not None:
        prog += [(_JGE, 0, 1, foreign), (_RET, 0, 0, eperm)]
    for name in dict.fromkeys((*DENIED, *also_denied)):
        if name in numbers and name not in allowed:
            prog += [(_JEQ, 0, 1, numbers[name]), (_RET, 0, 0, eperm)]
    if unix_sockets_only or no_unix_streams:
        block = [
            (_LD_ABS, 0, 0, 16),  # low half of args[0]: the address family
            (_JEQ, 1, 0, AF_UNIX),
            (_RET, 0, 0, eperm if unix_sockets_only else _ALLOW),
        ]
        if no_unix_streams:
            block += [
                (_LD_ABS, 0, 0, 24),  # low half of args[1]: the type
                (_AND, 0, 0, SOCK_TYPE_MASK),
                (_JEQ, 1, 0, SOCK_DGRAM),
                (_RET, 0, 0, eperm),
            ]
        block.append((_RET, 0, 0, _ALLOW))
        prog += [(_JEQ, 0, len(block), numbers["socket"]), *block]
    prog += [
        (_JEQ, 0, 1, numbers["clone3"]),
        (_RET, 0, 0, enosys),
        (_JEQ, 0, 1, numbers["openat2"]),
        (_RET, 0, 0, enosys),
    ]
    for number, index in modes.items():
        prog += [
            (_JEQ, 0, 4, number),
            (_LD_ABS, 0, 0, 16 + 8 * index),  # low half of the mode argument
            (_JSET, 0, 1, SET_ID_BITS),
            (_RET, 0, 0, eperm),
            (_RET, 0, 0, _ALLOW),
        ]
    prog += [
        (_JEQ, 0, 3, numbers["clone"]),
        (_LD_ABS, 0, 0, 16),  # low half of args[0]: the clone flags
        (_JSET, 0, 1, _CLONE_NAMESPACES),
        (_RET, 0, 0, eperm),
        (_RET, 0, 0, _ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)
