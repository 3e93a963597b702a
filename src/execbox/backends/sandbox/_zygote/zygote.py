"""The sandbox pool's zygote: runs INSIDE the bubblewrap jail, standard
library only (the jail does not see the execbox package; this file's folder is
bound in, and this file run as a script).

Start-up: enter a user namespace of its own (nested in the jail's; in it
the zygote may make namespaces), import the ``preload`` modules, become PID 1
of a PID namespace of its own, say ``ready`` on the control socket (fd given
in argv). Then, for each ``box`` message from the host (carrying the
cgroup.procs files of the cgroup made for it), make a *box* and send its
socket back. A box (box.py) is made once and kept for block after block:
fresh mount and PID namespaces, a private /tmp and /dev/shm, and an init
(PID 1) that forks each block's code process ahead of the block: in the
box's cgroup, in an IPC namespace of its own, every capability dropped,
no_new_privs, rlimits and the seccomp filter set, warmed up, waiting. The
host sends the block straight to the code process (a JSON request with the
status socket, stdout and stderr), which runs the Python file in this warm
interpreter (``run_file.py``) or execs the program, and the status socket to
the init. Whoever sees the end first reports ``exit N`` on the status socket
(the code process itself, after a Python file; else the init); the init then
kills what is left of the block, empties the box and makes the next code
process. ``kill`` on the status socket (or the host closing it) ends the
block at once.
"""

import ctypes
import gc
import json
import os
import resource
import select
import signal
import socket
import sys

# Started with `python -I` (no PYTHON* variable, no user site, no script folder on the path) and
# an environment built from nothing: what a caller sets reaches the blocks only (apply_block_env).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from box import box_main  # beside this file
from run_file import run_python_file  # beside this file
from session import serve_session  # beside this file
from tree import reap  # beside this file

# a block's own modules of those names are not shadowed
for _name in ("box", "run_file", "session", "tree"):
    del sys.modules[_name]
# sys.path[0] stays: the script's folder, which each block's own takes (run_file)

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWIPC = 0x00020000, 0x10000000, 0x20000000, 0x08000000
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAPBSET_DROP = 4, 38, 22, 24
SECCOMP_MODE_FILTER = 2
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC = 0x1, 0x2, 0x4, 0x20, 0x1000, 0x4000
SYS_CAPSET = {"x86_64": 126, "aarch64": 91}
MAX_FDS = 16
libc = ctypes.CDLL(None, use_errno=True)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def check(result, what):
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def write_file(path, text):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_user_namespace():
    """The zygote's own nested user namespace, made once: in it the zygote
    and the boxes it makes may make mount and PID namespaces (the jail's
    dropped every capability). Code processes drop these capabilities too."""
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER), "unshare user namespace")
    map_own_ids(uid, gid)


def map_own_ids(uid, gid):
    """In a user namespace just made: the ids it was made with, mapped to themselves."""
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    write_file("/proc/self/gid_map", f"{gid} {gid} 1")


def enter_block_user_namespace():
    """The block's own user namespace (the same ids mapped): RLIMIT_NPROC
    counts a user's processes per user namespace, so set in here it bounds
    the block and its children only, with no cgroup (a non-root user on a
    cgroup v1 host). Where one cannot be made, the limit counts in the
    zygote's namespace: the executor's processes, still not the host's."""
    uid, gid = os.getuid(), os.getgid()
    if libc.unshare(CLONE_NEWUSER) != 0:
        return
    # /proc/self of a process that is not dumpable is not its own to write
    check(libc.prctl(PR_SET_DUMPABLE, 1, 0, 0, 0), "dumpable")
    try:
        map_own_ids(uid, gid)
        # the kernel's OOM killer takes the block's processes before the box's init (in the same cgroup)
        write_file("/proc/self/oom_score_adj", "500")
    finally:
        check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")


def enter_namespaces(tmp_bytes, keep, pid_namespace):
    """A box's mount and PID namespaces, and a fresh /tmp and /dev/shm,
    each capped (emptied after each block, freed with the box). ``keep``:
    the paths under /tmp that must stay visible (the workspace, a venv).
    ``pid_namespace`` False (a GPU box): no PID namespace, its init stands
    in (tree.py). IPC: a namespace per block (``code_main``)."""
    check(libc.unshare(CLONE_NEWNS | (CLONE_NEWPID if pid_namespace else 0)), "unshare")
    held = [(path, os.open(path, os.O_PATH | os.O_CLOEXEC)) for path in keep]  # the new namespace's mounts
    options = f"size={tmp_bytes},mode=1777".encode()
    check(libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, options), "mount /tmp")
    check(libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", MS_NOSUID | MS_NODEV, options), "mount /dev/shm")
    for path, fd in held:
        os.makedirs(path, exist_ok=True)
        check(
            libc.mount(f"/proc/self/fd/{fd}".encode(), path.encode(), None, MS_BIND | MS_REC, None),
            f"bind {path}",
        )
        os.close(fd)


class Privileges:
    """What a code process drops, prepared once in the zygote: made in each
    fork, the ctypes objects cost ~0.5 ms of type creation."""

    def __init__(self, config):
        self.rlimits = []
        for name, value in config["rlimits"].items():
            limit = getattr(resource, "RLIMIT_" + name)
            hard = resource.getrlimit(limit)[1]
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            self.rlimits.append((limit, value))
        self.cap_header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        self.cap_data = (ctypes.c_uint32 * 6)()
        self.capset = SYS_CAPSET[os.uname().machine]
        program = bytes.fromhex(config["seccomp"])
        self.filter = ctypes.create_string_buffer(program) if program else None
        self.fprog = (
            SockFprog(len(program) // 8, ctypes.addressof(self.filter)) if self.filter is not None else None
        )

    def drop(self):
        for limit, value in self.rlimits:
            resource.setrlimit(limit, (value, value))
        # the bounding set here, not in the box's init: the block's user namespace gave a full one
        for cap in range(64):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                break
        check(libc.syscall(self.capset, self.cap_header, self.cap_data), "capset")
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
        if self.fprog is not None:
            check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(self.fprog), 0, 0), "seccomp")


# The sample warm_up compiles and runs, beside this file; its text, read once.
WARM_UP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "warm_up.py")
warm_up_source = []  # type: list[str]


def warm_up():
    """Compile and run a little code once: in the zygote, the compiler's
    first use initialises state (~2 ms); in a code process waiting for its
    block, the page faults of a fork's first compile, run and print (~1.5 ms)
    then happen before the block, not during it."""
    if not warm_up_source:  # in the zygote, before its first fork
        with open(WARM_UP) as handle:
            warm_up_source.append(handle.read())
    with open(os.devnull, "w") as out:
        exec(compile(warm_up_source[0], "<warm-up>", "exec", dont_inherit=True), {"OUT": out})


def apply_block_env(env):
    """The block's environment (the caller's variables among it), in the
    block only; PYTHONPATH goes on the path as an interpreter started with it
    would have put it."""
    os.environ.clear()
    os.environ.update(env)
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[1:1] = [os.path.abspath(p) for p in extra]  # after the script's folder, as python does


def stdio_as_started(env):
    """PYTHONIOENCODING of the blocks' environment on this interpreter's
    stdio (the blocks' own), as if it had started with it (``-I`` ignores it)."""
    encoding, _, errors = env.get("PYTHONIOENCODING", "").partition(":")
    for stream in (sys.stdout, sys.stderr):
        if stream is not None and (encoding or errors):
            stream.reconfigure(encoding=encoding or None, errors=errors or None)  # type: ignore[union-attr]


def load_filter(program_hex):
    """A seccomp filter (hex of ``struct sock_filter[]``) on this process and what it forks."""
    program = bytes.fromhex(program_hex)
    if not program:
        return
    buffer = ctypes.create_string_buffer(program)
    fprog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    check(libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0), "seccomp")


def code_main(sock, config):
    """The block's process, forked by its box's init ahead of the block (so
    in the box's cgroup from its start, no move between groups): an IPC
    namespace of its own (no SysV object or POSIX queue of an earlier block
    is seen, none outlives the block), every privilege dropped, stdin
    closed, in the workspace, warmed up, waiting for the request (with the
    status socket, stdout and stderr)."""
    try:
        check(libc.unshare(CLONE_NEWIPC), "unshare IPC namespace")
        os.setsid()
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.closerange(3, sock.fileno())
        os.closerange(sock.fileno() + 1, 1 << 16)
        os.chdir(config["cwd"])
        apply_block_env(config["env"])
        enter_block_user_namespace()
        config["privileges"].drop()
        warm_up()
        failed = None
    except BaseException as exc:  # told to the block's output once it comes
        failed = exc
    data, fds, _, _ = socket.recv_fds(sock, 1 << 20, MAX_FDS)
    if not data:
        os._exit(0)
    if data == b"session":  # a stateful session: blocks come one by one on this socket (session.py)
        serve_session(sock, failed, config["pid_namespace"])
    sock.close()
    status_fd, out_fd, err_fd = fds[:3]
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    os.close(out_fd)
    os.close(err_fd)
    for given in fds[3:4]:  # the block's stdin: a sealed memfd of the host's
        os.dup2(given, 0)
        os.close(given)
    for extra in fds[4:]:
        os.close(extra)
    os.set_inheritable(status_fd, False)
    try:  # before any of the block runs: a box that dies before this never ran it
        os.write(status_fd, b"started")
    except OSError:
        os._exit(0)  # the host gave up on this block
    request = json.loads(data)
    try:
        if failed is not None:
            raise failed
        if not request["inproc"]:
            for name in ("SIGPIPE", "SIGXFSZ"):  # ignored by Python; a program expects the defaults
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            os.execv(request["argv"][0], request["argv"])
        if "numpy.random" in sys.modules:  # a forked generator would repeat the zygote's numbers
            sys.modules["numpy.random"].seed()
        code = run_python_file(request["argv"][-1], request["argv"][-1:], request.get("code"))
    except BaseException as exc:
        os.write(2, f"execbox sandbox: cannot start the block: {exc!r}\n".encode())
        os._exit(126)
    # Report before leaving: the host need not wait for this process's teardown.
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass  # the code closed it itself
    try:
        os.write(status_fd, f"exit {code & 0xFF}".encode())
    except OSError:
        pass
    os._exit(code)


class Zygote:
    def __init__(self, control, config):
        self.control = control
        self.config = config
        # where make_box returns to after making a box's namespaces
        self.home_mnt = os.open("/proc/self/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        self.home_pid = (
            os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC) if config["pid_namespace"] else None
        )

    def make_box(self, cgroup_fds):
        """A box (box.py): fresh namespaces and its init, which forks the
        first block's code process and tells the host ``ready`` on the
        box's socket; the host gets that socket.

        The zygote makes the box's mount and PID namespaces itself, forks
        the box's init into them, and steps back into its own: no process
        in between (see ``main``)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            enter_namespaces(self.config["tmp_bytes"], self.config["keep"], self.config["pid_namespace"])
            pid = os.fork()
            if pid == 0:
                try:
                    ours.close()
                    self.control.close()
                    os.close(self.home_mnt)
                    if self.home_pid is not None:
                        os.close(self.home_pid)
                    box_main(theirs, cgroup_fds, self.config, code_main)
                except BaseException as exc:
                    try:
                        sys.stderr.write(f"execbox sandbox box failed: {exc!r}\n")
                    except BaseException:
                        pass
                os._exit(1)
        finally:
            check(libc.setns(self.home_mnt, CLONE_NEWNS), "setns back to the zygote's mounts")
            if self.home_pid is not None:
                check(libc.setns(self.home_pid, CLONE_NEWPID), "setns back to the zygote's PID namespace")
            theirs.close()
            for fd in cgroup_fds:
                os.close(fd)
        socket.send_fds(self.control, [b"box"], [ours.fileno()])
        ours.close()

    def serve(self):
        while True:
            reap()  # boxes' inits that have left (let go by the host, or thrown away)
            if not select.select([self.control], [], [], 1.0)[0]:
                continue
            data, fds, _, _ = socket.recv_fds(self.control, 1 << 16, MAX_FDS)
            if not data:
                return
            self.make_box(fds)


def main():
    control = socket.socket(fileno=int(sys.argv[1]))
    del sys.argv[1:]
    # the settings come on the socket, not in argv: a box's PID 1 is a fork of this process, and
    # /proc/1/cmdline would show a block the workspace, the environment, the limits
    config = json.loads(control.recv(1 << 20))
    stdio_as_started(config["env"])
    try:
        # the zygote's own filter, before anything else runs here: it may make namespaces and
        # mounts for its boxes, nothing else the blocks' filter denies (io_uring, bpf, keyctl...)
        load_filter(config["zygote_seccomp"])
    except OSError as exc:
        control.send(f"failed {exc}".encode())
        return
    try:
        enter_user_namespace()
    except OSError as exc:
        control.send(f"failed {exc}".encode())
        return
    try:
        for name in config["preload"]:
            __import__(name)
    except BaseException as exc:
        control.send(f"error cannot preload {name!r}: {type(exc).__name__}: {exc}".encode())
        return
    # No process of the pool may be read or written through /proc by a block
    # (the jail's /proc shows the pool's processes: other boxes wait there).
    check(libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "dumpable")
    # A mount and a PID namespace of the zygote's own (owned by its user
    # namespace), so that it may step into a box's namespaces and back. No
    # PID namespace below the jail's for a GPU pool: the driver refuses it.
    config.setdefault("pid_namespace", True)
    check(libc.unshare(CLONE_NEWNS | (CLONE_NEWPID if config["pid_namespace"] else 0)), "unshare")
    # The jail's /dev is one tmpfs for every box: read-only, so that no
    # block leaves a file or a link (/dev/stderr) there for the next one.
    check(
        libc.mount(None, b"/dev", None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None),
        "remount /dev read-only",
    )
    pid = os.fork() if config["pid_namespace"] else 0
    if pid:  # this process only waits; the zygote is the child, PID 1 of its namespace
        control.close()
        _, status = os.waitpid(pid, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    config["privileges"] = Privileges(config)
    warm_up()
    gc.collect()
    gc.freeze()  # forked children then do not copy pages just to collect the zygote's objects
    control.send(b"ready")
    Zygote(control, config).serve()


if __name__ == "__main__":
    main()
