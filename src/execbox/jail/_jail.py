"""The bubblewrap jail's helpers: finding bwrap, hiding its options, the
interpreter's folders, the inside environment and rlimits, the empty
network namespace, probing. What the jail binds is the policy's
(``_policy``), how it starts the launcher's (``_launcher``).
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

from .._errors import BackendUnavailableError
from ._container import FULL_ISOLATION, container
from ._policy import SYSTEM_DIRS

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
    "jail_rlimits",
    "probe",
    "setns_net",
    "spawn_kept",
    "write_all",
]

INSIDE_PATH = "/usr/local/bin:/usr/bin:/bin"
INSTALL_HINT = (
    "install bubblewrap (apt-get install bubblewrap), or run unisolated with "
    "backend='local' (CLI: --backend local)"
)


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def args_file(args: Sequence[str]) -> int:
    """A memfd holding bwrap's options NUL-separated, for ``bwrap --args FD``:
    the jail's PID 1 is bwrap, and /proc/1/cmdline would show a block every
    host path bound, the environment and the limits. The caller passes it
    to bwrap's process and closes it."""
    fd = os.memfd_create("execbox-bwrap-args", 0)
    write_all(fd, b"".join(arg.encode() + b"\0" for arg in args))
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def write_all(fd: int, data: bytes) -> None:
    """Write the whole of ``data`` to ``fd`` (a pipe or a memfd may take it in parts)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


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


def _has_sys_admin() -> bool:
    """Whether this process holds CAP_SYS_ADMIN (bit 21 of CapEff)."""
    try:
        with open("/proc/self/status") as status:
            effective = next(line for line in status if line.startswith("CapEff:"))
    except (OSError, StopIteration):
        return True  # no /proc/self/status: as before, try
    return bool(int(effective.split()[1], 16) >> 21 & 1)


def empty_netns(become: Callable[[], None]) -> int | None:
    """A descriptor of a network namespace with only loopback up, for one
    executor's one-shot jails to join: making a network namespace per block
    costs about half of bwrap's start-up, and its teardown more CPU after it.
    One per executor, never shared between executors (tenants).

    Made by a child that first becomes the jail id (``become``), then makes
    a user namespace of its own and the network namespace in it: that
    namespace does not belong to the host's initial user namespace, so host
    device events (uevents) do not reach it. Only root may join it later
    (None otherwise: each jail makes its own), and only with CAP_SYS_ADMIN
    (a container's root without it, ``docker run``'s default, may not)."""
    if os.geteuid() != 0 or not _has_sys_admin():
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


def probe(
    argv: Sequence[str], preexec: Callable[[], None] | None = None, pass_fds: Sequence[int] = ()
) -> None:
    """Raise BackendUnavailableError if bubblewrap cannot make this jail
    (``argv``: bwrap running /bin/true in it; ``preexec`` and ``pass_fds``:
    what the child does before bwrap and holds, as for real jails)."""
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=30, preexec_fn=preexec, pass_fds=pass_fds
        )
    except subprocess.SubprocessError as exc:
        raise BackendUnavailableError(
            "sandbox", f"cannot start bubblewrap as the jail's user: {exc}"
        ) from None
    if done.returncode != 0:
        cause = (
            "in a container, the engine's default seccomp profile, AppArmor profile and masked /proc paths "
            f"refuse it (for full isolation start the container with {FULL_ISOLATION}"
            if container()
            else "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, "
            "user.max_user_namespaces > 0"
        )
        raise BackendUnavailableError(
            "sandbox",
            f"bubblewrap could not create a sandbox here ({done.stderr.strip() or done.returncode}): "
            f"{cause}; `execbox doctor` names what this host lacks and the fix); or run "
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
