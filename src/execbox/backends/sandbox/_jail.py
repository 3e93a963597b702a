"""The bubblewrap jail: its arguments and what it needs to see.

A user namespace even when the host user is root (uid/gid 65534 inside,
mapped to a host id of the executor's own when execbox runs as root:
``_identity``; every capability dropped), new PID/IPC/UTS/network/cgroup namespaces, a
read-only root made of read-only binds of the system and interpreter
directories only (no home directories, no host /tmp), a private size-capped
/tmp and /dev/shm, the workspace as the only writable host path, a private
/proc, no network unless asked, an environment built from nothing.
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._errors import BackendUnavailableError

__all__ = [
    "INSIDE_PATH",
    "INSTALL_HINT",
    "args_file",
    "by_name",
    "empty_netns",
    "find_bwrap",
    "hidden_argv",
    "inside_environment",
    "interpreter_dirs",
    "jail_args",
    "jail_rlimits",
    "probe",
    "setns_net",
    "spawn_kept",
]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/mime.types",
    "/etc/nsswitch.conf",
    "/etc/os-release",
    "/etc/matplotlibrc",
    "/etc/fonts",
)
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf")
INSIDE_PATH = "/usr/local/bin:/usr/bin:/bin"
HIDDEN_PROC = (
    "/proc/keys",
    "/proc/key-users",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/kallsyms",
    "/proc/cmdline",
)
NOBODY = "65534"
INSTALL_HINT = (
    "install bubblewrap (apt-get install bubblewrap), or run unisolated with "
    "backend='local' (CLI: --backend local)"
)


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def jail_args(
    readonly: Sequence[str],
    *,
    network: bool,
    tmp_bytes: int,
    hostname: str,
    workspace: str,
    extra_readonly: Sequence[tuple[str, str]] = (),
    joined_netns: bool = False,
    writable: Sequence[tuple[str, str]] = (),
    sealed: Sequence[str] = (),
    source: Callable[[str], str] = str,
) -> list[str]:
    """bwrap's options (without the command). ``extra_readonly``: (host path,
    path inside) pairs bound read-only; ``writable``: (host path, path inside)
    pairs bound read-write (a kernel's socket folder, under a neutral name).
    ``joined_netns``: bwrap starts inside an empty network namespace already
    (``empty_netns``) instead of making one. ``source``: where bwrap finds a
    host path it binds (``Jailer.source``: a staged copy it can reach).
    ``sealed``: folders in the workspace (relative) bound read-only over
    themselves: the block reads them only."""
    args = [
        "--unshare-all",
        "--unshare-user",
        "--uid",
        NOBODY,
        "--gid",
        NOBODY,
        "--cap-drop",
        "ALL",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--hostname",
        hostname,
    ]
    if network or joined_netns:
        args.append("--share-net")
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in (*ETC_FILES, *(NETWORK_FILES if network else ())):
        args += ["--ro-bind-try", path, path]
    # /tmp before the interpreter binds: an interpreter (a venv) may live under the host's /tmp
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/tmp",
        "--size",
        str(tmp_bytes),
        "--tmpfs",
        "/dev/shm",
    ]
    # bwrap covers /proc/sys only when the directory is writable, and it is not,
    # but as root the files in it are (the jail's uid maps to the host's root):
    # core_pattern would run a program of the block's on the host.
    args += ["--ro-bind", "/proc/sys", "/proc/sys"]
    for path in HIDDEN_PROC:  # kernel keys and their owners: the host root's are listed
        if os.path.exists(path):
            args += ["--ro-bind", "/dev/null", path]
    for path in readonly:
        args += ["--ro-bind", source(path), path]
    for host, inside in extra_readonly:
        args += ["--ro-bind", source(host), inside]
    for host, inside in writable:
        args += ["--bind", source(host), inside]
    args += ["--bind", source(workspace), workspace]
    for relative in sealed:
        args += ["--ro-bind", f"{source(workspace)}/{relative}", f"{workspace}/{relative}"]
    args += ["--chdir", workspace, "--remount-ro", "/"]
    return args


def args_file(args: Sequence[str]) -> int:
    """A memfd holding bwrap's options NUL-separated, for ``bwrap --args FD``:
    the jail's PID 1 is bwrap, and /proc/1/cmdline would show a block every
    host path bound, the environment and the limits. The caller passes it
    to bwrap's process and closes it."""
    fd = os.memfd_create("execbox-bwrap-args", 0)
    data = memoryview(b"".join(arg.encode() + b"\0" for arg in args))
    while data:
        data = data[os.write(fd, data) :]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def hidden_argv(bwrap: str, options: Sequence[str], command: Sequence[str]) -> tuple[list[str], int]:
    """(argv, fd): bwrap with ``options`` read from a memfd (``args_file``),
    then ``command``; pass the fd to the child, then close it."""
    fd = args_file(options)
    return [bwrap, "--args", str(fd), "--", *command], fd


def by_name(program: str, path: str) -> str:
    """How the jail's command names ``program``: by its bare name when its
    folder leads ``path`` (the PATH bwrap and the program find it by; an
    interpreter then finds itself, its venv included, the same way), else by
    its path. The argv of the jail's PID 1 and of the program, which any
    block reads in /proc, then name no host folder (a venv in a home or a
    checkout)."""
    folder, name = os.path.split(program)
    return name if path.split(":")[0] == folder else program


def inside_environment(env: Mapping[str, str], bin_dir: str, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of code in the jail: the executor's, without the host
    user's name, with /tmp as home and the interpreter's bin first on PATH;
    ``extra`` (the user's variables) last."""
    inside = {k: v for k, v in env.items() if k not in ("USER", "LOGNAME")}
    inside.update({"HOME": "/tmp", "TMPDIR": "/tmp", "PATH": f"{bin_dir}:{INSIDE_PATH}"})
    inside.update(extra)
    return inside


def jail_rlimits(open_files: int, file_size_mb: int, address_space_mb: int | None = None) -> dict[str, int]:
    """rlimits of jailed code (name without RLIMIT_ -> value), each at most
    the current hard limit (an unprivileged process cannot raise one).
    ``address_space_mb``: RLIMIT_AS, where no memory cgroup stands in."""
    limits = {"NOFILE": open_files, "FSIZE": file_size_mb << 20, "CORE": 0}
    if address_space_mb is not None:
        limits["AS"] = address_space_mb << 20
    for name, value in limits.items():
        hard = resource.getrlimit(getattr(resource, f"RLIMIT_{name}"))[1]
        if hard != resource.RLIM_INFINITY:
            limits[name] = min(value, hard)
    return limits


CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
_libc = ctypes.CDLL(None, use_errno=True)
setns_net = _libc.setns  # called between fork and exec: made here, not there
_unshare = _libc.unshare


def empty_netns(become: Callable[[], None]) -> int | None:
    """A descriptor of a network namespace with only loopback up, for one
    executor's one-shot jails to join: making a network namespace per block
    costs about half of bwrap's start-up, and its teardown more CPU after it.
    One per executor, never shared between executors (tenants).

    Made by a child that first becomes the jail id (``become``), then makes
    a user namespace of its own and the network namespace in it: that
    namespace does not belong to the host's initial user namespace, so host
    device events (uevents) do not reach it. Only root may join it later
    (None otherwise: each jail makes its own)."""
    if os.geteuid() != 0:
        return None

    def make() -> None:  # in the child, before it execs cat: system calls only
        become()
        if _unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "execbox: unshare a network namespace")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # loopback up, as bwrap does
            fcntl.ioctl(s.fileno(), 0x8914, struct.pack("16sH22x", b"lo", 0x1 | 0x8 | 0x40))

    try:
        holder = subprocess.Popen(
            ["/bin/cat"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=make,
            close_fds=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    try:
        return os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    finally:
        assert holder.stdin is not None
        holder.stdin.close()  # the holder leaves; the descriptor keeps the namespace
        holder.wait()


def probe(prefix: Sequence[str], preexec: Callable[[], None] | None = None) -> None:
    """Raise BackendUnavailableError if bubblewrap cannot make this jail
    (``preexec``: what the child does before bwrap, as for real jails)."""
    try:
        done = subprocess.run(
            [*prefix, "--", "/bin/true"], capture_output=True, text=True, timeout=30, preexec_fn=preexec
        )
    except subprocess.SubprocessError as exc:
        raise BackendUnavailableError(
            "sandbox", f"cannot start bubblewrap as the jail's user: {exc}"
        ) from None
    if done.returncode != 0:
        raise BackendUnavailableError(
            "sandbox",
            f"bubblewrap could not create a sandbox here ({done.stderr.strip() or done.returncode}): "
            "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0; `execbox doctor` names what this host lacks and the fix); or run "
            "unisolated with backend='local' (CLI: --backend local)",
        )


def interpreter_dirs(python: str) -> list[str]:
    """Directories the interpreter needs that the system binds do not cover:
    its prefixes (a venv and its base), resolved through symlinks."""
    script = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix]))"
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise BackendUnavailableError(
            "sandbox", f"cannot run the interpreter {python}: {done.stderr.strip()}"
        )
    found: list[str] = []
    for path in [*json.loads(done.stdout), os.path.dirname(os.path.realpath(python))]:
        for candidate in (path, os.path.realpath(path)):
            if any(candidate == d or candidate.startswith(d + "/") for d in SYSTEM_DIRS):
                continue
            if os.path.isdir(candidate) and candidate not in found:
                found.append(candidate)
    # a parent bound first, then its children would be redundant
    return [p for p in found if not any(p != q and p.startswith(q + "/") for q in found)]


def spawn_kept(argv: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """Popen from a thread that lives as long as the process: bwrap's
    --die-with-parent kills the jail when the *thread* that started it ends,
    and the caller's thread may be a short-lived worker."""
    box: dict[str, Any] = {}
    spawned = threading.Event()

    def keep() -> None:
        try:
            box["proc"] = subprocess.Popen(argv, **options)
        except BaseException as exc:  # noqa: BLE001 (handed to the caller, raised there)
            box["error"] = exc
        finally:
            spawned.set()
        if "proc" in box:
            box["proc"].wait()

    threading.Thread(target=keep, name="execbox-jail-keeper", daemon=True).start()
    spawned.wait()
    if "error" in box:
        raise box["error"]
    return box["proc"]
