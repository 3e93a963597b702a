"""Hosts where bubblewrap cannot start, made for real on this machine.

``without_user_namespaces`` runs a command as a given user in a user
namespace of the test's own whose ``user.max_user_namespaces`` is 0: every
user namespace below it is refused (ENOSPC), as on a host whose sysctl
forbids them, or a container whose seccomp profile does. Needs root.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["without_user_namespaces"]

CLONE_NEWUSER = 0x10000000
_libc = ctypes.CDLL(None, use_errno=True)


def without_user_namespaces(
    argv: Sequence[str], *, uid: int, gid: int, env: Mapping[str, str], cwd: str
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as ``uid:gid`` where no user namespace can be made
    (its stdout and stderr together; pytest's timeout bounds it)."""
    assert os.geteuid() == 0, "mapping every id into a new user namespace needs root"
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # system calls only until exec
        try:
            os.close(ready_r)
            os.close(go_w)
            os.close(out_r)
            if _libc.unshare(CLONE_NEWUSER) != 0:
                os._exit(120)
            os.write(ready_w, b"u")
            if os.read(go_r, 1) != b"g":
                os._exit(121)
            fd = os.open("/proc/sys/user/max_user_namespaces", os.O_WRONLY)
            os.write(fd, b"0")
            os.close(fd)
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            os.chdir(cwd)
            os.dup2(out_w, 1)
            os.dup2(out_w, 2)
            os.execve(argv[0], list(argv), dict(env))
        finally:
            os._exit(122)
    os.close(ready_w)
    os.close(go_r)
    os.close(out_w)
    try:
        assert os.read(ready_r, 1) == b"u", "the child could not make its user namespace"
        for name in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{name}", "w") as handle:
                handle.write("0 0 65536\n")
        os.write(go_w, b"g")
        chunks = []
        with os.fdopen(out_r, "rb") as out:
            out_r = -1
            chunks.append(out.read())
    finally:
        for fd in (ready_r, go_w, out_r):
            if fd >= 0:
                os.close(fd)
    _, status = os.waitpid(pid, 0)
    return subprocess.CompletedProcess(
        list(argv), os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace"), ""
    )
