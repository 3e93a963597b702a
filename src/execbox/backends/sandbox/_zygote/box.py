"""A box: the jail a pool keeps for block after block (standard library
only; runs in the jail, beside zygote.py, as the box's init).

The zygote makes a box once: mount, IPC and PID namespaces of its own
(none of the last on a GPU pool), a capped /tmp and /dev/shm, and this
init, PID 1 there. Then, for each block: the init forks the block's code
process ahead of demand (it joins the box's cgroup, drops every privilege,
warms up) and hands the host its socket (``ready``); the host sends the
request to the code process and ``go`` with the status socket to the init.
When the code process ends (or the host says ``kill``, or closes the status
socket) the init cleans the box for the next block:

- every process left in the box is killed and reaped: ``kill(-1)`` from the
  namespace's init reaches all of them and nothing outside; without a PID
  namespace, the init is the subreaper of everything the block started
  (tree.py);
- /tmp and /dev/shm are emptied (never past a mount: the workspace and the
  folders kept under /tmp are binds), and what remains must be what the box
  was made with: the same folders, modes and owners;
- SysV IPC and POSIX queues need nothing: each code process makes an IPC
  namespace of its own (zygote.py, ``code_main``), gone with its processes.

Anything that does not come out as expected (a process that will not die
within CLEAN_WAIT_S, a file that cannot be removed, more than MAX_WIPED
entries left, a folder changed) and
the init leaves: the box is thrown away (its namespaces die with it) and the
host makes another. After MAX_BLOCKS blocks a box is replaced as well.
"""

import os
import select
import signal
import socket
import stat
import time

from tree import become_subreaper, end_tree  # beside this file

MAX_FDS = 16
MAX_BLOCKS = 5000  # then a fresh box: nothing a kernel counts per namespace grows without end
CLEAN_WAIT_S = 5.0  # the block's processes are SIGKILLed: past this one is stuck (D state)
MAX_WIPED = 10000  # entries a block left: past them the box goes whole (its tmpfs freed by the kernel)
WIPED = ("/tmp", "/dev/shm")
# Signals PID 1 of a namespace takes from a process inside it only when it
# handles them: ignored, so that no block can make the init leave (or stop).
IGNORED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE")


class Skeleton:
    """What /tmp and /dev/shm hold when the box is made: the folders that
    lead to the kept paths (binds) and those paths, by mode and owner."""

    def __init__(self, keep):
        self.kept = {}  # path -> (st_dev, st_ino): a kept bind, never entered
        self.folders = {}  # path -> (mode, uid, gid): /tmp, /dev/shm and the folders leading to binds
        for top in WIPED:
            if top not in keep:  # /tmp itself a bind: the workspace, never emptied
                self.folders[top] = self._what(top)
        for path in keep:
            info = os.lstat(path)
            self.kept[path] = (info.st_dev, info.st_ino)
            parent = os.path.dirname(path)
            while parent not in WIPED and parent not in ("/", ""):
                self.folders[parent] = self._what(parent)
                parent = os.path.dirname(parent)

    @staticmethod
    def _what(path):
        info = os.lstat(path)
        return (info.st_mode, info.st_uid, info.st_gid)

    def intact(self):
        """Whether the kept binds and the folders to them are as made."""
        try:
            for path, made in self.folders.items():
                if self._what(path) != made:
                    return False
            for path, (dev, ino) in self.kept.items():
                info = os.lstat(path)
                if (info.st_dev, info.st_ino) != (dev, ino):
                    return False
        except OSError:
            return False
        return True


def empty(top, skeleton):
    """Remove what a block left under ``top`` (a tmpfs of the box's own),
    by folder descriptor, never following a link and never crossing into
    another file system (a bind); True when all that is left is the box's
    own skeleton."""
    try:
        fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return _empty(fd, top, os.fstat(fd).st_dev, skeleton, [0])
    finally:
        os.close(fd)


def _empty(fd, path, dev, skeleton, seen):
    clean = True
    with os.scandir(fd) as entries:
        names = [entry.name for entry in entries]
    seen[0] += len(names)
    if seen[0] > MAX_WIPED:  # a block that made a million files does not keep the next one waiting
        return False
    for name in names:
        full = path.rstrip("/") + "/" + name
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError:
            return False
        if full in skeleton.kept:
            continue  # a bind kept for the blocks: not ours to empty
        if info.st_dev != dev:
            return False  # a mount the box was not made with
        if stat.S_ISDIR(info.st_mode):
            try:
                inner = _open_folder(name, fd)
            except OSError:
                return False
            try:
                clean = _empty(inner, full, dev, skeleton, seen) and clean
            finally:
                os.close(inner)
            if full in skeleton.folders:
                continue  # a folder to a bind: Skeleton.intact checks its mode and owner
            try:
                os.rmdir(name, dir_fd=fd)
            except OSError:
                return False
        else:
            try:
                os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except OSError:
                return False
    return clean


def _open_folder(name, fd):
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        return os.open(name, flags, dir_fd=fd)
    except PermissionError:  # a block's mode 000 folder: its owner (our uid) may open it up
        os.chmod(name, 0o700, dir_fd=fd, follow_symlinks=False)
        return os.open(name, flags, dir_fd=fd)


def sweep(pid_namespace, pid):
    """Kill and reap every process the block left; False if one outlives CLEAN_WAIT_S."""
    if not pid_namespace:
        end_tree(pid)  # the subreaper's way: the block's group, then every descendant
        return True
    deadline = time.monotonic() + CLEAN_WAIT_S
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # from PID 1: every process of the namespace but this one
        except ProcessLookupError:
            pass
        try:
            found, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return True  # no child left: in a PID namespace, no process but the init
        if found == 0:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0002)


def watch(pid, status):
    """Wait for the block's end: its code process exits (reported on the
    status socket) or the host says ``kill`` / goes away. ``int`` (a
    stateful session's interrupted block) interrupts it and waits on."""
    exit_fd = os.pidfd_open(pid)
    try:
        while True:
            ready, _, _ = select.select([status, exit_fd], [], [])
            if exit_fd in ready:
                _, wait_status = os.waitpid(pid, 0)
                code = os.waitstatus_to_exitcode(wait_status)
                try:
                    status.sendall(f"exit {code if code >= 0 else 128 - code}".encode())
                except OSError:
                    pass
                return
            try:
                message = status.recv(64)
            except OSError:
                message = b""
            if message == b"int":
                os.kill(pid, signal.SIGINT)
                continue
            return  # kill, or the host went away
    finally:
        os.close(exit_fd)


def box_main(host, cgroup_fds, config, code_main):
    """The box's init: a block at a time, each in a fresh code process, the
    box cleaned after each (see the module's text); leaves (the box thrown
    away) on EOF from the host, on anything unexpected, or after MAX_BLOCKS.

    The init joins the box's cgroup itself, once: each code process is born
    in it (a move between groups takes a lock the whole kernel shares); the
    pids limit counts the init too (the host's group allows for it)."""
    for fd in cgroup_fds:
        os.write(fd, b"0")
        os.close(fd)
    pid_namespace = config["pid_namespace"]
    if not pid_namespace:
        become_subreaper()
    for name in IGNORED:
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    skeleton = Skeleton(config["keep"])
    for _ in range(MAX_BLOCKS):
        code_ours, code_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            host.close()
            code_ours.close()
            for name in IGNORED:  # a block's program starts with the defaults (Python's own for SIGINT)
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGPIPE, signal.SIG_IGN)  # as Python starts; an exec'd program resets it
            code_main(code_theirs, config)
            os._exit(0)
        code_theirs.close()
        try:
            socket.send_fds(host, [b"ready"], [code_ours.fileno()])
            data, fds, _, _ = socket.recv_fds(host, 64, MAX_FDS)
        except OSError:
            data, fds = b"", []
        finally:
            code_ours.close()
        for extra in fds[1:]:
            os.close(extra)
        if data != b"go" or not fds:
            sweep(pid_namespace, pid)
            os._exit(0)  # the pool let go of this box
        status = socket.socket(fileno=fds[0])
        try:
            watch(pid, status)
        finally:
            status.close()
        if not sweep(pid_namespace, pid):  # every child reaped: nothing left to collect here
            os._exit(1)
        wiped = [top for top in WIPED if top not in skeleton.kept]
        if not all(empty(top, skeleton) for top in wiped) or not skeleton.intact():
            os._exit(1)
    os._exit(0)
