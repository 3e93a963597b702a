"""A unit's processes without a PID namespace of its own (a GPU unit: a
nested PID namespace makes the NVIDIA driver refuse ``cuInit``, error 304).

What the namespace gave, done by the unit's init instead: it is the child
subreaper of everything the block starts (an orphan comes back to it, not
to the zygote), and before it leaves it kills the block's process group and
then every process that is, or becomes, its child. A cgroup, where the host
has one, is emptied by the host as well. Standard library only (runs in the
jail, beside zygote.py).
"""

import ctypes
import os
import signal

PR_SET_CHILD_SUBREAPER = 36
MAX_ROUNDS = 10000  # each round kills every child it sees; RLIMIT_NPROC bounds how many there are
libc = ctypes.CDLL(None, use_errno=True)


def become_subreaper():
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"child subreaper: {os.strerror(err)}")


def children():
    """This process's children, every thread's (a thread forks too)."""
    me = os.getpid()
    found = []  # type: list[int]
    try:
        threads = os.listdir(f"/proc/{me}/task")
    except OSError:
        return found
    for tid in threads:
        try:
            with open(f"/proc/{me}/task/{tid}/children") as handle:
                found += [int(p) for p in handle.read().split()]
        except (OSError, ValueError):
            pass
    return found


def kill_descendants():
    """Kill and reap every descendant of this subreaper: each round kills
    the children it sees (and their groups); the children of those come
    back to this process when their parent dies, for the next round."""
    for _ in range(MAX_ROUNDS):
        reap()
        left = children()
        if not left:
            return
        for child in left:
            kill_group_and(child)
        for child in left:
            try:
                os.waitpid(child, 0)
            except (ChildProcessError, InterruptedError):
                pass


def end_tree(pid):
    """Kill ``pid`` (the block's process, a session leader), its group and
    every descendant of this subreaper; reap them all."""
    kill_group_and(pid)
    kill_descendants()


def kill_group_and(pid):
    for target in (os.killpg, os.kill):
        try:
            target(pid, signal.SIGKILL)
        except OSError:
            pass


def reap():
    """Collect every child that has left (the zygote's units' inits, a subreaper's orphans)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
