"""Who the agent's blocks run as, and why none of them can reach the
host's channel (``agent.py``, beside this file, imports it). Runs inside
the container: standard library only, Python 3.6 or later.

The channel is the container's stdio: pipes that the engine's init (PID 1)
and the agent hold, owned by the container's user. A block of that same
user could open them through ``/proc/1/fd/1`` and write frames the host
took for the agent's (a forged EXIT, seen). Making the holder not dumpable
(or the agent PID 1) closes that on runc alone: under gVisor (runsc
release-20221219, measured) ``/proc/PID/fd`` stays open to the same user
whatever the holder's dumpability, the pipe's owner can chmod it back after
an fchmod to 0, and PID 1 takes SIGKILL and SIGSTOP from inside. So blocks
run under another uid:

- the container starts as root with SETUID, SETGID and SETPCAP alone (no
  other capability, no-new-privileges);
- the agent (``enter``) empties the bounding set, keeps root as its real
  and saved uid and takes the block user as its effective one: what it
  does between blocks (kill a block's leftovers, empty /tmp, remove IPC
  objects) it does as that user, without CAP_KILL or CAP_FOWNER, and with
  no effective capability at all;
- a block (``run_child``: ``only_these`` closes the channel, then
  ``become``) takes the block user as real, effective and saved uid and
  gid: every capability is gone, for good.

A block then owns neither the stdio pipes (root's, mode 0600), nor the
agent's or init's /proc entries (another uid: ptrace access, signals,
chmod refused, on runc and under gVisor alike). ``exposed`` checks that at
the agent's start, from a process made exactly as a block is: where it
finds a way in, the agent refuses to start (the host then runs the image's
blocks as ``docker exec``). The agent's own pipe is made before it takes
the block user's uid, so it is root's too; the blocks' output pipes are
the block user's (``echo > /dev/stdout`` opens them again), and so shared
by the blocks running at the same time.

Authenticating the frames instead would not hold: blocks are forked from
the agent, so a key in its memory would be in every block's.
"""

import errno
import grp
import os
import pwd
import signal
import sys

__all__ = [
    "BlockUser",
    "Refused",
    "become",
    "drop_bounding_set",
    "enter",
    "exposed",
    "load_prctl",
    "only_these",
    "probe",
    "run_child",
]

PR_SET_DUMPABLE, PR_CAPBSET_DROP = 4, 24
TOKEN_VAR = "EXECBOX_RUN_TOKEN"


class Refused(Exception):
    """The agent cannot keep its blocks off the host's channel."""


def load_prctl():
    """libc's prctl (raising OSError), or Refused (an image without ctypes)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
    except Exception as exc:
        raise Refused(f"no ctypes ({exc}): the agent cannot drop its capabilities") from None

    def prctl(option, arg=0):
        if libc.prctl(option, arg, 0, 0, 0) < 0:
            code = ctypes.get_errno()
            raise OSError(code, os.strerror(code))

    return prctl


class BlockUser:
    """``user[:group]`` as Docker reads it (names looked up in the image; a
    numeric user of no account and no group gets group 0), with the groups
    Docker would give it."""

    def __init__(self, spec):
        name, _, group = spec.partition(":")
        if name.isdigit():
            self.uid, entry = int(name), _find(pwd.getpwuid, int(name))
        else:
            entry = _find(pwd.getpwnam, name)
            if entry is None:
                raise Refused(f"no user {name!r} in the image")
            self.uid = entry.pw_uid
        if group.isdigit():
            self.gid = int(group)
        elif group:
            found = _find(grp.getgrnam, group)
            if found is None:
                raise Refused(f"no group {group!r} in the image")
            self.gid = found.gr_gid
        else:
            self.gid = entry.pw_gid if entry is not None else 0
        self.groups = [self.gid] if entry is None else sorted(set(os.getgrouplist(entry.pw_name, self.gid)))
        if self.uid == 0:
            raise Refused("blocks would run as root, the agent's own uid")


def _find(look_up, key):
    try:
        return look_up(key)
    except (KeyError, OverflowError):
        return None


def only_these(stdin, stdout, stderr, keep=()):
    """This process's descriptors: the three given as 0, 1 and 2, and
    ``keep``; every other one closed (the channel with them)."""
    for target, fd in enumerate((stdin, stdout, stderr)):
        os.dup2(fd, target)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2 and int(name) not in keep:
            try:
                os.close(int(name))
            except OSError:
                pass


def enter(user, prctl):
    """The agent's identity (module docstring): no bounding set, root as
    real and saved uid, the block user as effective uid, not dumpable.
    Raises Refused where the container was not started as root with
    SETUID, SETGID and SETPCAP (``container_create_kwargs`` changed it?)."""
    if os.getresuid() != (0, 0, 0):
        raise Refused(
            f"the container's user is not root ({os.getuid()}): blocks cannot run under another uid"
        )
    try:
        drop_bounding_set(prctl)
        os.setgroups(user.groups)
        os.setresgid(0, user.gid, 0)
        os.setresuid(0, user.uid, 0)
        prctl(PR_SET_DUMPABLE, 0)
    except OSError as exc:
        raise Refused(
            f"the agent could not take its identity ({exc}): the container needs root with "
            "SETUID, SETGID and SETPCAP"
        ) from None


def drop_bounding_set(prctl):
    """Empty this process's capability bounding set (``prctl`` raises OSError)."""
    for cap in range(64):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # EINVAL: past the kernel's last capability
                raise
            break


def become(user, prctl):
    """In a forked child of the agent: the block user for good, with no
    capability left (raises OSError otherwise: the block must not run)."""
    os.setresuid(-1, 0, -1)  # the capabilities that setgroups and setresgid need
    os.setgroups(user.groups)
    os.setresgid(user.gid, user.gid, user.gid)
    os.setresuid(user.uid, user.uid, user.uid)
    if os.getresuid() != (user.uid,) * 3 or os.getresgid() != (user.gid,) * 3:
        raise OSError(errno.EPERM, f"the block user was not taken: {os.getresuid()} {os.getresgid()}")
    prctl(PR_SET_DUMPABLE, 1)  # its own processes may read its /proc entries, as anywhere else


def run_child(request, stdio, user, prctl, run_python_file):
    """A block's process, forked by the agent: a session of its own, the
    channel closed (``stdio``: its stdin, stdout and stderr, the rest
    closed), then the block user for good, first in the OOM killer's line,
    in its workdir with its token; then its code (``run_python_file``, in
    this interpreter) or its program (exec'd). Never returns."""
    code = 1
    try:
        os.setsid()
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        only_these(*stdio)  # first: nothing of the channel nor of the agent's identity reaches the block
        become(user, prctl)
        try:
            with open("/proc/self/oom_score_adj", "w") as handle:
                handle.write("500")
        except OSError:
            pass
        os.chdir(request["workdir"])
        os.environ.update(request.get("env") or {})
        os.environ[TOKEN_VAR] = request["token"]
        if request.get("stdin"):  # a file the host wrote in the read-only .execbox/, as the block user
            given = os.open(request["stdin"], os.O_RDONLY | os.O_NOFOLLOW)
            os.dup2(given, 0)
            os.close(given)
            sys.stdin = open(0, closefd=False)  # noqa: SIM115 (fd 0 is the block's for good)
        if request.get("python"):
            code = run_python_file(request["python"], [request["python"]])
        else:
            argv = request["argv"]
            for name in ("SIGPIPE", "SIGXFSZ"):  # as a shell leaves them for what it starts
                if hasattr(signal, name):
                    signal.signal(getattr(signal, name), signal.SIG_DFL)
            try:
                os.execvp(argv[0], argv)
            except OSError as exc:
                missing = exc.errno == errno.ENOENT
                os.write(2, f"execbox: {argv[0]}: {'not found' if missing else exc.strerror}\n".encode())
                code = 127 if missing else 126
    except BaseException:
        try:
            import traceback

            os.write(2, traceback.format_exc().encode())
        except BaseException:
            pass
    finally:
        os._exit(code)


def exposed(holders):
    """What a block could reach of the channel (descriptors 0, 1 and 2)
    through the processes ``holders`` (init and the agent), from a process
    made as a block is: a list of what it could do, empty when nothing."""
    found = []
    for pid in holders:
        for fd in (0, 1, 2):
            path = f"/proc/{pid}/fd/{fd}"
            for flags, what in ((os.O_WRONLY, "write"), (os.O_RDONLY, "read")):
                try:
                    os.close(os.open(path, flags | os.O_NONBLOCK))
                    found.append(f"{what} {path}")
                except OSError:
                    pass
            try:
                os.chmod(path, 0o666)
                found.append(f"chmod {path}")
            except OSError:
                pass
        try:
            os.kill(pid, 0)
            found.append(f"signal {pid}")
        except OSError:
            pass
    return found


def probe(user, prctl):
    """Fork a process made as a block is (``only_these``, ``become``) and
    ask it ``exposed``; raises Refused with what it found."""
    holders = sorted({1, os.getpid()})
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        text = "the probe failed"
        try:
            null = os.open(os.devnull, os.O_RDWR)
            only_these(null, null, null, keep=(write_end,))
            become(user, prctl)
            text = "; ".join(exposed(holders))
        except BaseException as exc:
            text = f"the probe failed: {exc!r}"
        finally:
            try:
                os.write(write_end, text.encode()[:4000])
            finally:
                os._exit(0)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(pid, 0)
    found = b"".join(chunks).decode(errors="replace")
    if found:
        raise Refused(f"a block could reach the host's channel: {found}")
