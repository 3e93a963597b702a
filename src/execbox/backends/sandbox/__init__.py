"""The sandbox backend, the default: each block isolated by bubblewrap,
limited by cgroups, rlimits and a seccomp filter.

Two ways to run a block, same isolation:
- the warm pool (default): one jail per executor holds a zygote interpreter
  (``preload`` modules imported); each block runs in a fresh unit forked from
  it, inside nested user/mount/PID namespaces of its own with a fresh /tmp,
  every capability dropped, discarded afterwards (``_pool``, ``_zygote``);
- one-shot (``pool=False``): a new bubblewrap jail per block.

Every jail is made from one ``JailPolicy`` (``_policy``: built from the
limits and the options by ``_jail_policy``) through one launcher
(``_launcher``).

Each block gets a cgroup of its own (memory, processes, CPU) where the host
allows it (root, or a delegated cgroup), else rlimits stand in where they can.

When execbox runs as root, the executor's jails run as a host id of its own
(``_identity``): the workspace is handed to that id at start, and so is
every folder execbox makes for a named block.

Two isolation tiers (``isolation``): namespaces (bubblewrap, above), and,
where bubblewrap cannot make a user namespace (Ubuntu 24.04+ for a user who
is not root, Docker and Kubernetes containers), Landlock + seccomp + rlimits
with no namespace and one process per block (``_landlock_tier``, which says
what that tier leaves visible). ``"auto"`` takes the first that starts and
warns once when it is Landlock (``WeakerIsolationWarning``);
``isolation_in_use`` says which runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..._errors import BackendUnavailableError
from ..._gpus import GpuGrant, grant, parse_gpus
from ..._models import DEFAULT_FILE_SIZE_MB, DEFAULT_OPEN_FILES
from ..._workspace import MAX_SCANNED_ENTRIES
from ...jail import (
    INSIDE_PATH,
    INSTALL_HINT,
    CgroupSupport,
    Egress,
    GpuWatcher,
    Jailer,
    JailPolicy,
    Lease,
    cgroup_support,
    find_bwrap,  # also exported: where bubblewrap is, None without it
    gpu_memory_watcher,
    inside_environment,
    interpreter_dirs,
    is_jail_id,
    jail_rlimits,
    lease,
    seccomp_supported,
)
from .._executor_api import Capabilities
from .._host import HostExecutor
from .._ownership import hand_over, reown_tree
from ._capabilities import sandbox_capabilities
from ._jail_parts import JailParts
from ._landlock_tier import LandlockTier
from ._options import check_options
from ._pool import ZygotePool
from ._stateful import StatefulRunner

__all__ = ["SandboxExecutor", "find_bwrap"]


class SandboxExecutor(JailParts, HostExecutor):
    """Run blocks isolated (see the module docstring).

    Takes the options of ``LocalExecutor`` but ``inherit_env`` (the jail's
    environment is built from nothing: pass what blocks need with ``env=``),
    plus:

    - ``pool`` (True): keep a warm zygote; False runs a jail per block.
    - ``pool_size`` (4, at most 64): blocks' units kept ready ahead of
      demand; callers beyond them get a unit made for each on demand.
    - ``preload``: modules the zygote imports once, so blocks do not pay it.
    - ``tmp_size_mb`` (256): the private /tmp of each block.
    - ``file_size_mb`` (1024): the largest file a block may write (RLIMIT_FSIZE).
    - ``max_open_files`` (1024): RLIMIT_NOFILE.
    - ``seccomp`` (True): deny ptrace, mount, bpf, keyctl, namespaces... .
    - ``cgroups`` (True): a cgroup per block where the host allows it; False
      leaves memory to RLIMIT_AS and processes to the timeout.
    - ``hostname``: what the block sees as its host name (namespaces only).
    - ``isolation`` ("auto"): "namespaces" (bubblewrap; fails where it cannot
      start), "landlock" (no namespaces: weaker, see ``_landlock_tier``; no
      pool), or "auto": namespaces where bubblewrap starts, else Landlock.
    - ``stateful`` (False): True keeps one Python session in the jail whose
      variables and imports persist between Python blocks, without ipykernel
      (``_session``): a last expression shows its value, matplotlib figures
      become PNG displays, a timeout interrupts the block and keeps the state,
      a dead interpreter is replaced (the result says the state was lost).
      Shell blocks run in the same jail; /tmp persists through the session,
      and ``restart()`` starts a fresh one. Needs the pool and the namespaces tier.
    - ``gpus`` (None): NVIDIA GPUs the blocks may use: "all", an index, a
      UUID or a list of them (``execbox._gpus``); only their device nodes are
      bound. A pooled executor's GPU blocks each run in a jail of their own;
      the stateful session keeps CUDA's context between cells (``_gpu``).

    Unset ``Limits.memory_mb`` and ``max_processes`` take the defaults of
    every isolating backend: half the machine's memory (at most 8 GiB) and
    512 processes (``Limits.effective_memory_mb()``, ``effective_max_processes()``).
    """

    name = "sandbox"

    def __init__(
        self,
        *,
        pool: bool = True,
        pool_size: int = 4,
        preload: Sequence[str] = (),
        tmp_size_mb: int = 256,
        file_size_mb: int = DEFAULT_FILE_SIZE_MB,
        max_open_files: int = DEFAULT_OPEN_FILES,
        seccomp: bool = True,
        cgroups: bool = True,
        hostname: str = "execbox",
        isolation: str = "auto",
        stateful: bool = False,
        gpus: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.gpus = parse_gpus(gpus)
        sizes = {"pool_size": pool_size, "tmp_size_mb": tmp_size_mb}
        sizes.update(file_size_mb=file_size_mb, max_open_files=max_open_files)
        check_options(
            pool=pool, preload=preload, isolation=isolation, stateful=stateful, gpus=gpus, sizes=sizes
        )
        self.pool = pool
        self.pool_size = pool_size
        self.preload = tuple(preload)
        self.tmp_size_mb = tmp_size_mb
        self.file_size_mb = file_size_mb
        self.max_open_files = max_open_files
        self.seccomp = seccomp and seccomp_supported()
        self.cgroups = cgroups
        self.hostname = hostname
        self.isolation = isolation
        self.stateful = stateful
        self._stateful: StatefulRunner | None = None  # the runner of a stateful executor, once started
        self.isolation_in_use: str | None = None  # "namespaces" or "landlock" once started
        self._landlock: LandlockTier | None = None
        self._policy = JailPolicy(workspace=str(self.workspace.path))  # the real one at start
        self._capabilities: tuple[str, Capabilities] | None = None
        self._bwrap = ""
        self._zygote: ZygotePool | None = None
        self._cgroups: CgroupSupport | None = None
        self._netns: int | None = None
        self._egress: Egress | None = None  # Limits(network=True): the jails' namespace (_egress)
        self._lease: Lease | None = None
        self._jailer = Jailer(None, ())
        self._gpu: GpuGrant | None = None
        self._gpu_watch: GpuWatcher | None = None  # Limits.gpu_memory_mb (_gpu)
        self._gpu_watch_how = ""

    @property
    def _zygote_kept(self) -> bool:
        """Whether blocks run in a zygote's units: the pool's, but a GPU
        executor's stateless blocks each take a jail of their own (``_gpu``)."""
        return self.pool and (self.gpus is None or self.stateful)

    @property
    def capabilities(self) -> Capabilities:
        """What the executor holds; computed once per tier (the cgroup
        probes and the languages' lookups do not change per block)."""
        tier = self.isolation_in_use or self.isolation
        if self._capabilities is None or self._capabilities[0] != tier:
            self._capabilities = (tier, self._find_capabilities())
        return self._capabilities[1]

    def _find_capabilities(self) -> Capabilities:
        return sandbox_capabilities(self)

    @property
    def pool_health(self) -> dict[str, Any] | None:
        """The warm pool's state (None without one, or before the first
        block): boxes held, ready, being cleaned and asked for, blocks
        running, boxes made and replaced, refills failed, zygote restarts,
        stalls (waits past a deadline)."""
        zygote = self._zygote
        return zygote.health() if zygote is not None else None

    @property
    def memory_mb(self) -> int:
        """The memory limit a block gets."""
        return self.limits.effective_memory_mb()

    def _start(self) -> None:
        bwrap = find_bwrap() if self.isolation != "landlock" else None
        if bwrap is None and self.isolation == "namespaces":
            raise BackendUnavailableError(self.name, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        self._gpu = grant(self.gpus, backend=self.name) if self.gpus is not None else None
        super()._start()
        assert self._python is not None
        self._cgroups = cgroup_support()[0] if self.cgroups else None
        self._gpu_watch, self._gpu_watch_how = gpu_memory_watcher(
            self._gpu, self.limits.gpu_memory_mb, self._cgroups is not None
        )
        self._capabilities = None  # how gpu_memory_mb holds is known now
        readonly = interpreter_dirs(self._python)
        workspace = str(self.workspace.path)
        self._lease = lease()
        try:
            if self._lease is not None:  # the jail's id owns the workspace, and what earlier jails left in it
                hand_over(workspace, self._lease.uid, self._lease.gid)
                reown_tree(workspace, self._lease.uid, self._lease.gid, is_jail_id, limit=MAX_SCANNED_ENTRIES)
            inside = inside_environment(self._child_env, self.environment.bin_dir(self._python), self.env)
            self._policy = self._jail_policy(workspace, readonly, inside)
            why = (
                f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}"
                if bwrap is None and self.isolation == "auto"
                else None
            )
            if bwrap is not None:
                why = self._probe_namespaces(bwrap, readonly)
            if why is not None or self.isolation == "landlock":
                self._start_landlock(why)
                return
            assert bwrap is not None  # else why is set ("auto"), or _start raised ("namespaces")
            self._start_namespaces(bwrap)
        except BaseException:
            self._stop()  # the lease, the staging folders, a half-started pool
            raise

    def _stop(self) -> None:
        if self._stateful is not None:
            self._stateful.close()
            self._stateful = None
        self._landlock = None
        if self._zygote is not None:
            self._zygote.stop()
            self._zygote = None
        if self._egress is not None:  # its namespace and slirp4netns
            self._egress.close()
            self._egress = None
        elif self._netns is not None:
            os.close(self._netns)
        self._netns = None
        self._jailer.close()
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        super()._stop()

    def give_to_blocks(self, paths: Iterable[str]) -> None:
        if self._lease is not None:
            hand_over(str(self.workspace.path), self._lease.uid, self._lease.gid, list(paths))

    def _toolchain_path(self) -> tuple[str, str]:
        assert self._python is not None
        return dict(self._policy.env).get("PATH", INSIDE_PATH), self._python

    def _give_build(self, folders: tuple[str, ...]) -> None:
        if self._lease is None:
            return
        for folder in folders:  # the folder itself only: those above it stay execbox's
            fd = self.workspace.internal_folder(folder)
            try:
                os.fchown(fd, self._lease.uid, self._lease.gid)
            finally:
                os.close(fd)

    def _rlimits(self) -> dict[str, int]:
        """What a process gets before it enters the jail (one-shot: bwrap's;
        the pool: each code process, with ``_block_rlimits``)."""
        # no memory cgroup: the address space is the next best thing, but for CUDA (_gpu)
        stand_in = self._cgroups is None and self.gpus is None
        return jail_rlimits(self.max_open_files, self.file_size_mb, self.memory_mb if stand_in else None)

    def _block_rlimits(self) -> dict[str, int]:
        """A pool's code process's: also RLIMIT_NPROC, set inside the block's
        own user namespace, where it counts the block's processes only (on
        the host it would count every process of the user)."""
        return {**self._rlimits(), "NPROC": self._max_processes}

    @property
    def _max_processes(self) -> int:
        return self.limits.effective_max_processes()
