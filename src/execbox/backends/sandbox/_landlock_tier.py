"""The sandbox's second tier: Landlock, seccomp and rlimits, no namespaces.

Where bubblewrap cannot make a user namespace (Ubuntu 24.04+ for a user who
is not root: AppArmor's ``kernel.apparmor_restrict_unprivileged_userns``;
inside Docker or Kubernetes, whose default seccomp and AppArmor profiles
deny namespaces), each block runs as a plain child process confined by what
needs no namespace, as OpenAI's codex does on Linux. Between fork and exec
(system calls only; everything is prepared in the parent), the child:

- joins the block's cgroup where the host allows one (memory, pids, CPU);
- sets rlimits: NOFILE, FSIZE, CORE=0, AS where no memory cgroup is, and
  NPROC = ``Limits.max_processes``. Without a user namespace RLIMIT_NPROC
  counts every process of the real uid: as root, the child first becomes the
  executor's leased jail id (``_identity``: no supplementary group but the
  reach group where ``_acl`` opened closed folders to it, an
  emptied capability bounding set), so the count is this executor's
  processes; as a user who is not root it counts all of that user's
  processes (a user with many running may find blocks refused ``fork``);
- joins a session keyring of its own (the host's keys are not possessed;
  where keyctl itself is refused, as Docker's default seccomp profile does,
  the keys are out of the block's reach already: ``_landlock_child.py``);
- as root, makes a mount namespace of its own where it may, in which
  /dev/shm is a folder made for the block (POSIX semaphores and shared
  memory: multiprocessing's locks, queues and pools);
- restricts itself with Landlock (``_landlock``): read and execute on the
  system folders and the interpreter's, read on a few files of /etc and on
  /proc, read and write on the workspace and on the folders made for the
  block (``TMPDIR`` and ``HOME``, never in the host's /dev/shm; and its
  /dev/shm, where only the files POSIX shared memory and semaphores make
  can be made: ``_landlock.SHARED_MEMORY``; removed afterwards),
  /dev/null and its kin; nothing else: not the host's /tmp, nor the host's
  /dev/shm. With the network off, TCP bind and connect are refused
  (ABI 4+); signals and abstract unix sockets stay inside the block's domain
  (ABI 6+);
- loads the project's seccomp filter, with ``socket()`` for AF_UNIX only
  when the network is off, no AF_UNIX stream or seqpacket socket ever (with
  the host's filesystem in view, a block would connect to any pathname socket
  its uid may open: Landlock does not mediate ``connect``, and a user's
  session D-Bus or, for a docker-group member, the Docker socket run
  programs outside any sandbox), no SysV IPC or POSIX message queues
  (both are the host's here), and no inotify or fanotify (Landlock does not
  mediate them: a watch on /tmp or /dev/shm, folders the block may not
  list, named the host's files made or changed there); no_new_privs is set.

The environment is the one the namespaces tier builds (``inside_environment``),
the working directory the workspace. What a block starts dies with it: its
process group, every process carrying its run token, its cgroup, or, as
root without one, every process of the jail id (``kill -9 -1`` run as that
id, when no other block of the executor runs).

As root, the jail id must reach the workspace and the interpreter: where a
folder above them is closed (an interpreter under /root), the child shows
them through a private mount namespace (a tmpfs over the closed folder with
the needed paths bound in: ``_reach``), which root outside a container may make;
where it may not (a container's root without CAP_SYS_ADMIN), the closed
root-owned folders give the jails' reach group search by an ACL entry and
the child carries that group (``_acl``); where neither can be done, start
fails and says which folder to open.

What this tier does not hide (the namespaces tier does):

- host processes: /proc lists them and their command lines (their
  environment, memory, descriptors and root folder stay refused: other ids,
  and Landlock refuses ptrace-like access outside the domain);
- the host's network namespace: with the network off only AF_UNIX
  datagram sockets (and ``socketpair``) can be made, and a datagram may
  reach a host datagram socket its uid may write (journald, syslog). The
  network on is refused (``refuse_network``): without a namespace of its
  own a block would have the host's network, its loopback services, its
  addresses and the cloud metadata endpoint, and Landlock (ABI 4+)
  restricts TCP bind and connect by port only, never by address;
- unix stream sockets are refused, so what needs them fails with EPERM:
  multiprocessing's forkserver (Python 3.14's default start method: use
  ``fork``) and ``Manager``, a unix-socket server of the block's own;
- the host's name, /dev (device nodes are visible; only null, zero, full,
  random and urandom open, and the nodes of the GPUs given with ``gpus``),
  readable system files (/usr, the granted /etc files, /proc, including
  /proc/cmdline);
- names: Landlock does not mediate ``stat``, ``access`` or ``readlink``, so
  a block may learn whether a host path it guesses exists (its size, owner
  and times too), though not list a folder nor open the file; /proc/net/unix
  names the host's unix sockets;
- no /dev/shm as a user who is not root, nor as root where no mount
  namespace can be made (a container's root without CAP_SYS_ADMIN): the
  host's is not granted and cannot be replaced, so POSIX shared memory and
  semaphores (``multiprocessing``'s Lock, Queue and Pool,
  ``multiprocessing.shared_memory``) fail with EACCES there;
- no private /tmp: /tmp is the host's and closed to the block (only its own
  folder in it is open); the block's folders are on the host's disk,
  bounded per file only;
- without signal scoping (Landlock ABI < 6) a block run by a user who is not
  root may signal that user's other processes and reach abstract sockets;
  below ABI 4 TCP is refused by seccomp alone; below ABI 3 ``truncate(2)``
  is refused outright; ABI 1 refuses renames across folders;
- as a user who is not root without a delegated cgroup, a daemon that clears
  its environment and leaves the session outlives the block;
- no warm pool (``pool``, ``preload``) and no ``hostname``: one process per
  block; ``seccomp=False`` drops the socket and IPC refusals too (with the
  network off, only TCP stays refused, on ABI 4+).
"""

from __future__ import annotations

import ctypes
import os
import resource
import shutil
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping, Sequence

from ..._errors import BackendUnavailableError, WeakerIsolationWarning
from ..._languages import LANGUAGE_ETC
from ...jail import (
    ETC_FILES,
    HOST_IPC,
    NAME_WATCHES,
    NETWORK_FILES,
    NETWORK_ISOLATION,
    SYSTEM_DIRS,
    BlockCgroup,
    JailPolicy,
    Lease,
    container,
    filter_program,
    grant_search,
    mount_namespaces,
    reach_group,
    reachable,
    seccomp_supported,
)
from ...jail import landlock as ll
from .._process import Cancellation, OutputCallback, ProcessOutcome, new_token, run_process
from ._landlock_child import SYSCALLS, SockFprog, entry, kill_all_as
from ._reach import Reach, reach_supported

__all__ = ["LandlockTier", "landlock_problem", "refuse_network", "warn_weaker"]

SYSTEM_RIGHTS = ll.READ | ll.EXECUTE
WRITABLE_RIGHTS = ll.READ | ll.WRITE | ll.EXECUTE  # the workspace and the block's temporary folder
DEVICE_RIGHTS = ll.READ_FILE | ll.WRITE_FILE | ll.TRUNCATE | ll.IOCTL_DEV
DEVICES_RW = ("/dev/null", "/dev/zero", "/dev/full")
DEVICES_RO = ("/dev/random", "/dev/urandom")
SHM = "/dev/shm"
SHM_RIGHTS = ll.SHARED_MEMORY  # on the block's own /dev/shm folder, never on the host's
MIN_ABI_TRUNCATE = 3
LANDLOCK_HINT = (
    "Landlock needs Linux 5.13+ with landlock among the active security modules "
    "(the lsm= boot parameter), and, in a container, a seccomp profile that allows its system calls"
)

_warned: set[str] = set()
_warned_lock = threading.Lock()


def landlock_problem() -> str | None:
    """Why the Landlock tier cannot run here (None: it can)."""
    reason = ll.unavailable_reason()
    if reason is None and not (os.uname().machine in SYSCALLS and reach_supported()):
        reason = f"no system call numbers for the {os.uname().machine} architecture"
    return reason


def refuse_network(network: bool, why: str = "") -> None:
    """BackendUnavailableError for the network on: this tier cannot keep a
    block from this machine (the module docstring). ``why``: what kept the
    namespaces tier from starting."""
    if network:
        raise BackendUnavailableError(
            "sandbox",
            "Limits(network=True) needs the namespaces tier (a network namespace of the block's own, "
            "reaching the internet and not this machine); the Landlock tier would give the block the "
            "host's network: its loopback services, its addresses, the cloud metadata endpoint "
            "(Landlock restricts TCP by port only, never by address)"
            + (f". The namespaces tier cannot start here: {why}" if why else "")
            + ". Run where bubblewrap can make namespaces (isolation='namespaces'"
            + (f"; in this container: start it with {NETWORK_ISOLATION}" if container() else "")
            + "), use backend='docker', or set Limits(network=False)",
        )


def warn_weaker(why: str) -> None:
    """Warn, once per process for each reason, that blocks run in the Landlock tier."""
    with _warned_lock:
        if why in _warned:
            return
        _warned.add(why)
    warnings.warn(
        f"the sandbox runs blocks in its Landlock tier, weaker than namespaces (host processes, "
        f"the host's network namespace, /dev and system files stay visible: see "
        f"execbox.backends.sandbox._landlock_tier), because {why}",
        WeakerIsolationWarning,
        stacklevel=5,
    )


class LandlockTier:
    """One executor's blocks, each a process confined as the module says.

    Of the ``policy`` it holds the workspace, the interpreter's folders
    (``readonly``), the environment (its HOME and TMPDIR of /tmp become the
    block's temporary folder), the network switch, the rlimits with NPROC
    of ``max_processes``, and the seccomp switch (its own, stricter
    program); the module docstring says what it cannot hold."""

    def __init__(self, policy: JailPolicy, *, lease: Lease | None) -> None:
        refuse_network(policy.network)
        workspace, readonly, network = policy.workspace, policy.readonly, policy.network
        env = dict(policy.env)
        rlimits = dict(policy.rlimits)
        if policy.max_processes is not None:
            rlimits["NPROC"] = policy.max_processes
        seccomp = policy.seccomp is not None
        self.workspace = workspace
        self.network = network
        self.lease = lease
        self.abi = ll.abi()
        self.env = dict(env)
        self.limits = []
        for name, value in rlimits.items():
            which = getattr(resource, f"RLIMIT_{name}")
            hard = resource.getrlimit(which)[1]
            self.limits.append((which, value if hard == resource.RLIM_INFINITY else min(value, hard)))
        self.rules: list[tuple[str, int]] = [(p, SYSTEM_RIGHTS) for p in SYSTEM_DIRS if not os.path.islink(p)]
        self.rules += [(p, SYSTEM_RIGHTS) for p in readonly]
        etc = (*ETC_FILES, *LANGUAGE_ETC, *(NETWORK_FILES if network else ()))
        self.rules += [(p, ll.READ) for p in (*etc, "/proc")]
        self.rules += [(p, DEVICE_RIGHTS) for p in DEVICES_RW] + [(p, ll.READ_FILE) for p in DEVICES_RO]
        self.rules += [(p, DEVICE_RIGHTS) for p, _ in policy.devices]  # a GPU's: CUDA talks by ioctl
        self.rules += [(host, SYSTEM_RIGHTS) for host, _ in policy.extra_readonly]  # the driver's folders
        self.rules += [(workspace, WRITABLE_RIGHTS)]
        self.tmp_base = tempfile.gettempdir()
        if (os.path.realpath(self.tmp_base) + "/").startswith(os.path.realpath(SHM) + "/"):
            self.tmp_base = "/tmp"  # the block's folders are never in the host's /dev/shm
        if lease is not None and not reachable(os.path.join(self.tmp_base, "x"), lease.uid, lease.gid):
            self.tmp_base = "/tmp"
        self.reach = Reach([workspace, *readonly], lease, workspace) if lease is not None else None
        self.groups: list[int] = []  # the jail id's supplementary groups: the reach group, or none
        if lease is not None and self.reach and not mount_namespaces():
            self.reach, self.groups = None, _reach_by_acl([workspace, *readonly], lease)
        # as root, /dev/shm is bound to a folder of the block's in a mount namespace of its own
        self.shm = os.fsencode(SHM) if lease is not None and os.path.isdir(SHM) else None
        denied = (*HOST_IPC, *NAME_WATCHES, *(("truncate",) if self.abi < MIN_ABI_TRUNCATE else ()))
        self.program = (
            filter_program(unix_sockets_only=not network, no_unix_streams=True, also_denied=denied)
            if seccomp and seccomp_supported()
            else b""
        )
        self.filter = ctypes.create_string_buffer(self.program) if self.program else None
        self.fprog = SockFprog(len(self.program) // 8, ctypes.addressof(self.filter)) if self.filter else None
        self.numbers = SYSCALLS.get(os.uname().machine, {})
        self.cap_header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
        self.cap_data = (ctypes.c_uint32 * 6)()
        self.last_cap = _last_cap()
        # the program the sweep's child execs once it has signalled (it needs no kill(1): procps
        # is not in a minimal Debian, and without it daemons outlived their block there)
        self.true = shutil.which("true", path="/usr/bin:/bin")
        self._running = 0
        self._running_lock = threading.Lock()

    def probe(self, python: str) -> None:
        """Raise BackendUnavailableError if a block cannot start in this tier."""
        problem = landlock_problem()
        if problem is not None:
            raise BackendUnavailableError("sandbox", f"the Landlock tier cannot run: {problem}")
        outcome = self.run(
            [python, "-c", ""], None, timeout_s=60, output_limit=1 << 16, cancel=None, on_output=None
        )
        if outcome.exit_code != 0:
            said = outcome.capture.combined.text()[-800:]
            raise BackendUnavailableError(
                "sandbox",
                f"the interpreter does not start in the Landlock tier (exit {outcome.exit_code}): {said}",
            )

    def run(
        self,
        argv: list[str],
        group: BlockCgroup | None,
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: bytes | None = None,
        extra_env: Mapping[str, str] | None = None,
        address_limit: bool = True,
    ) -> ProcessOutcome:
        """Run ``argv`` under the tier's rules (the workspace is writable
        whole here, a build folder too), ``extra_env`` added to its
        environment; ``address_limit=False``: RLIMIT_DATA in place of
        RLIMIT_AS (a compiler: a JVM or Node.js reserves far more than it uses)."""
        tmp = tempfile.mkdtemp(prefix="execbox-block-", dir=self.tmp_base)
        shm = tempfile.mkdtemp(prefix="execbox-shm-", dir=self.tmp_base) if self.shm else None
        ruleset = -1
        status_r, status_w = os.pipe2(os.O_CLOEXEC)
        fds: list[int] = []
        with self._running_lock:
            self._running += 1
        try:
            if self.lease is not None:
                for folder in (tmp, shm):
                    if folder is not None:
                        os.chown(folder, self.lease.uid, self.lease.gid)
            own = [(tmp, WRITABLE_RIGHTS), *([(shm, SHM_RIGHTS)] if shm else [])]
            ruleset = ll.create_ruleset(
                [*self.rules, *own], deny_tcp=not self.network, scoped=True, version=self.abi
            )
            fds = group.open_procs() if group is not None else []
            env = {**self.env, **{k: tmp for k in ("HOME", "TMPDIR") if self.env.get(k, "/tmp") == "/tmp"}}
            env.update(extra_env or {})
            token = new_token()
            try:
                return run_process(
                    argv,
                    cwd=self.workspace,
                    env=env,
                    timeout_s=timeout_s,
                    output_limit=output_limit,
                    cancel=cancel,
                    on_output=on_output,
                    token=token,
                    preexec=self._enter(ruleset, fds, status_w, shm, address_limit),
                    also_kill=self._killer(group),
                    stdin=stdin,
                )
            except (OSError, subprocess.SubprocessError) as exc:
                os.close(status_w)
                status_w = -1
                said = os.read(status_r, 4096).decode(errors="replace")
                raise BackendUnavailableError(
                    "sandbox", f"a block could not be confined in the Landlock tier: {said or exc}"
                ) from None
        finally:
            with self._running_lock:
                self._running -= 1
            for fd in (ruleset, status_r, status_w, *fds):
                if fd >= 0:
                    os.close(fd)
            _remove_tree(tmp)
            if shm is not None:
                _remove_tree(shm)

    def _enter(
        self, ruleset: int, procs: Sequence[int], status: int, shm: str | None, address_limit: bool = True
    ) -> Callable[[], None]:
        limits, lease, reach, fprog, groups = self.limits, self.lease, self.reach, self.fprog, self.groups
        if not address_limit:  # a compiler: RLIMIT_DATA bounds it, not counting a JVM's reservations
            limits = [(resource.RLIMIT_DATA if w == resource.RLIMIT_AS else w, v) for w, v in limits]
        shm_source, shm_target = (os.fsencode(shm), self.shm) if shm and self.shm else (None, None)
        keyctl, capset = self.numbers["keyctl"], self.numbers["capset"]
        cap_header, cap_data, last_cap = self.cap_header, self.cap_data, self.last_cap

        return entry(
            ruleset=ruleset,
            procs=procs,
            status=status,
            limits=limits,
            lease=lease,
            reach=reach,
            groups=groups,
            fprog=fprog,
            shm_source=shm_source,
            shm_target=shm_target,
            keyctl=keyctl,
            capset=capset,
            cap_header=cap_header,
            cap_data=cap_data,
            last_cap=last_cap,
        )

    def _killer(self, group: BlockCgroup | None) -> Callable[[], None]:
        """What kills the block's processes besides its process group and
        token: its cgroup, which none of them can leave; without one, as
        root, every process of the jail id, once (``kill(-1)`` is one pass
        the kernel makes with forks held off), unless another block of this
        executor runs now."""
        done = False

        def kill() -> None:
            nonlocal done
            if group is not None:
                group.kill()
                return
            if done or self.lease is None or self.true is None:
                return
            with self._running_lock:
                alone = self._running == 1
            if alone:
                done = True
                try:
                    subprocess.run(
                        [self.true],
                        preexec_fn=kill_all_as(self.lease),
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        close_fds=True,
                        check=False,
                    )
                except (OSError, subprocess.SubprocessError):
                    pass  # the process group and the run token were signalled already

        return kill


def _reach_by_acl(paths: list[str], lease: Lease) -> list[int]:
    """No mount namespace can show the jail id ``paths`` it cannot reach:
    the closed folders above them give the reach group search (``_acl``);
    the groups the child carries."""
    why = grant_search(paths, lease.uid, lease.gid, reach_group())
    if why:
        raise BackendUnavailableError(
            "sandbox",
            f"the jail id (uid {lease.uid}) cannot reach {', '.join(paths)}, and root can neither show them "
            f"in a mount namespace here nor open the folders above them by an ACL ({why}): put the "
            "virtual environment and the workspace where others may search, or open the folders above "
            "them to others (chmod o+x)",
        )
    return [reach_group()]


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", "rb") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


def _remove_tree(path: str) -> None:
    """Remove the block's temporary folder, also where it closed folders to its owner."""
    shutil.rmtree(path, ignore_errors=True)
    if not os.path.lexists(path):
        return
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            try:
                os.chmod(os.path.join(root, name), 0o700, follow_symlinks=False)
            except (OSError, NotImplementedError):
                pass
    shutil.rmtree(path, ignore_errors=True)
