"""The jail's policy: one frozen value saying what a jailed process sees
and what holds it, and the two things the kernel is handed from it,
bubblewrap's options and the seccomp program.

Every jail of execbox is made from a ``JailPolicy``: the pool's zygote,
the one-shot block, the stateful session (a pool unit) and the jailed
Jupyter kernel (``_launcher`` turns a policy into a running jail); the
Landlock tier takes the same value and applies what it can without
namespaces (``_landlock_tier`` says what it cannot). What the block sees:

- a user namespace, uid and gid 65534 inside, every capability dropped,
  new PID, IPC, UTS, network and cgroup namespaces (``--unshare-all``);
- a read-only root of the system folders (``SYSTEM_DIRS``), a few /etc
  files (the resolver's too when ``network``: /etc/resolv.conf is
  ``resolv_conf``, naming the egress namespace's DNS forwarder), the interpreter's folders
  (``readonly``) and ``extra_readonly`` (host, inside) pairs;
- a private /proc with /proc/sys read-only and the kernel-key, symbol and
  command-line files hidden; a minimal /dev plus ``devices`` ((host node,
  node inside) pairs bound as they are: a GPU's, ``_gpu``);
- a private /tmp and /dev/shm of ``tmp_bytes`` each;
- the workspace as the only writable host path, ``writable`` (host,
  inside) pairs beside it, ``sealed`` workspace folders read-only over
  themselves, ``unsealed`` ones within them writable again (a build);
- a network namespace of its own (``--unshare-all``), or, with
  ``joined_netns``, the one the launch joins, made once per executor: an
  empty one (``_jail.empty_netns``), or with ``network`` the egress one,
  whose way out reaches the internet and not this machine (``_egress``).
  ``network`` never means the host's network: without ``joined_netns``
  the jail's namespace is empty, and the launcher refuses to start it;
- ``env`` and nothing else of the host's environment (``--clearenv``);
- the ``seccomp`` profile: "block" (``_seccomp.DENIED``), "zygote" (the
  same but the namespace and mount calls a pool's zygote makes its units
  with), or None;
- ``rlimits`` set before the jail starts; ``memory_mb``, ``max_processes``
  and ``cpus`` held by a cgroup where the host allows one.

The process identity on the host (a leased uid when execbox is root,
``_identity``) is a resource the executor holds, not part of the value.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._languages import LANGUAGE_ETC
from ._seccomp import ZYGOTE_ALLOWED, filter_program

__all__ = [
    "ETC_FILES",
    "HIDDEN_PROC",
    "NETWORK_FILES",
    "NOBODY",
    "SECCOMP_PROFILES",
    "SYSTEM_DIRS",
    "Host",
    "JailPolicy",
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
HIDDEN_PROC = (
    "/proc/keys",
    "/proc/key-users",
    "/proc/timer_list",
    "/proc/sched_debug",
    "/proc/kallsyms",
    "/proc/cmdline",
)
NOBODY = "65534"
SECCOMP_PROFILES = ("block", "zygote")


@dataclass(frozen=True)
class Host:
    """What the options ask of the host's layout (a merged-/usr /bin is a
    link, /lib32 may be missing): the real one by default; the golden tests
    give a fixed one, so the argv they pin is the same on every machine."""

    is_link: Callable[[str], bool] = os.path.islink
    read_link: Callable[[str], str] = os.readlink
    is_dir: Callable[[str], bool] = os.path.isdir
    exists: Callable[[str], bool] = os.path.exists


@dataclass(frozen=True)
class JailPolicy:
    """What a jailed process sees and what holds it (the module docstring)."""

    workspace: str
    readonly: tuple[str, ...] = ()
    extra_readonly: tuple[tuple[str, str], ...] = ()
    writable: tuple[tuple[str, str], ...] = ()
    sealed: tuple[str, ...] = ()
    unsealed: tuple[str, ...] = ()
    devices: tuple[tuple[str, str], ...] = ()
    network: bool = False
    joined_netns: bool = False
    resolv_conf: str | None = None
    tmp_bytes: int = 256 << 20
    hostname: str = "execbox"
    seccomp: str | None = "block"
    rlimits: tuple[tuple[str, int], ...] = ()
    memory_mb: int | None = None
    max_processes: int | None = None
    cpus: float | None = None
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)  # may hold the user's secrets

    def __post_init__(self) -> None:
        if self.seccomp is not None and self.seccomp not in SECCOMP_PROFILES:
            raise ValueError(
                f"JailPolicy(seccomp=...) is one of {SECCOMP_PROFILES} or None, got {self.seccomp!r}"
            )
        for name, _ in self.rlimits:
            if name.startswith("RLIMIT_"):
                raise ValueError(f"JailPolicy(rlimits=...) names a limit without RLIMIT_, got {name!r}")

    def bwrap_options(self, source: Callable[[str], str] = str, host: Host = Host()) -> list[str]:
        """bwrap's options (without the command). ``source``: where bwrap
        finds a host path it binds (``Jailer.source``: a staged copy it can
        reach when the jail runs as a leased id)."""
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
            self.hostname,
        ]
        if self.joined_netns:  # the namespace the launch joined: never the host's (_launcher)
            args.append("--share-net")
        for path in SYSTEM_DIRS:
            if host.is_link(path):  # /bin -> usr/bin on merged-/usr systems
                args += ["--symlink", host.read_link(path), path]
            elif host.is_dir(path):
                args += ["--ro-bind", path, path]
        resolver = NETWORK_FILES[1:] if self.network else ()  # the host's resolv.conf names its own resolver
        for path in (*ETC_FILES, *LANGUAGE_ETC, *resolver):
            args += ["--ro-bind-try", path, path]
        if self.network and self.resolv_conf is not None:
            args += ["--ro-bind", source(self.resolv_conf), NETWORK_FILES[0]]
        # /tmp before the interpreter binds: an interpreter (a venv) may live under the host's /tmp
        size = str(self.tmp_bytes)
        args += ["--proc", "/proc", "--dev", "/dev", "--size", size, "--tmpfs", "/tmp"]
        args += ["--size", size, "--tmpfs", "/dev/shm"]
        # bwrap covers /proc/sys only when the directory is writable, and it is not,
        # but as root the files in it are (the jail's uid maps to the host's root):
        # core_pattern would run a program of the block's on the host.
        args += ["--ro-bind", "/proc/sys", "/proc/sys"]
        for path in HIDDEN_PROC:  # kernel keys and their owners: the host root's are listed
            if host.exists(path):
                args += ["--ro-bind", "/dev/null", path]
        for host_node, inside in self.devices:  # after --dev /dev: bound into it as they are on the host
            args += ["--dev-bind", host_node, inside]
        for path in self.readonly:
            args += ["--ro-bind", source(path), path]
        for host_path, inside in self.extra_readonly:
            args += ["--ro-bind", source(host_path), inside]
        for host_path, inside in self.writable:
            args += ["--bind", source(host_path), inside]
        args += ["--bind", source(self.workspace), self.workspace]
        for relative in self.sealed:
            args += ["--ro-bind", f"{source(self.workspace)}/{relative}", f"{self.workspace}/{relative}"]
        for relative in self.unsealed:  # a compiler's build folder, inside a sealed one
            args += ["--bind", f"{source(self.workspace)}/{relative}", f"{self.workspace}/{relative}"]
        args += ["--chdir", self.workspace, "--remount-ro", "/"]
        for key, value in self.env:
            args += ["--setenv", key, value]
        return args

    def seccomp_program(self, machine: str | None = None) -> bytes | None:
        """The filter of the policy's profile for ``machine`` (this one by
        default), as ``struct sock_filter[]``; None without one."""
        if self.seccomp is None:
            return None
        allowed: Sequence[str] = ZYGOTE_ALLOWED if self.seccomp == "zygote" else ()
        return filter_program(machine, allowed=allowed)
