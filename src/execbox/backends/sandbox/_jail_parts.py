"""The parts a ``SandboxExecutor``'s start assembles (``JailParts``, the
part of the executor that makes them): the blocks' jail policy, the egress
namespace of the network on, the warm pool and its zygote's jail, the
blocks' runner, and the Landlock tier where the namespaces tier cannot start
(``_start`` in ``__init__.py`` picks the tier and calls these).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..._errors import BackendUnavailableError
from ..._gpus import GpuGrant
from ..._models import Limits
from ..._nofollow import open_folders
from ..._workspace import INTERNAL_DIR, Workspace
from ...environments import Environment
from ...jail import (
    FULL_ISOLATION_OPTIONS,
    INSIDE_PATH,
    NETWORK_ISOLATION,
    CgroupSupport,
    Egress,
    GpuWatcher,
    Jailer,
    JailPolicy,
    Lease,
    by_name,
    cgroup_maker,
    container,
    empty_netns,
    no_watch,
    open_egress,
    policy_for,
    prepare,
    probe,
    reachable,
)
from ._box_spec import box_config
from ._landlock_tier import LANDLOCK_HINT, LandlockTier, landlock_problem, refuse_network, warn_weaker
from ._pool import ZYGOTE_INSIDE, ZYGOTE_SOURCE, ZygotePool
from ._runner import ONE_SHOT_OVERHEAD, JailRunner
from ._stateful import StatefulRunner

__all__ = ["NAMESPACES_HINT", "JailParts"]

NAMESPACES_HINT = (
    "on Ubuntu 24.04+ a user who is not root needs sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for bwrap; "
    f"a container needs {' '.join(FULL_ISOLATION_OPTIONS)}"
)


class JailParts:
    """The jail's parts, made at start: a part of ``SandboxExecutor`` (which
    sets these attributes in its ``__init__`` and ``_start``)."""

    name: ClassVar[str]
    limits: Limits
    tmp_size_mb: int
    hostname: str
    seccomp: bool
    preload: tuple[str, ...]
    stateful: bool
    pool_size: int
    isolation_in_use: str | None
    _python: str | None
    _policy: JailPolicy
    _gpu: GpuGrant | None
    _gpu_watch: GpuWatcher | None
    _cgroups: CgroupSupport | None
    _lease: Lease | None
    _jailer: Jailer
    _egress: Egress | None
    _landlock: LandlockTier | None
    isolation: str
    workspace: Workspace
    _bwrap: str
    _netns: int | None
    _zygote: ZygotePool | None
    _stateful: StatefulRunner | None
    _runner: Any
    _blocks_write_internal: Any

    if TYPE_CHECKING:

        @property
        def environment(self) -> Environment: ...
        @property
        def _zygote_kept(self) -> bool: ...
        def _rlimits(self) -> dict[str, int]: ...
        def _block_rlimits(self) -> dict[str, int]: ...

    def _jail_policy(self, workspace: str, readonly: list[str], inside: dict[str, str]) -> JailPolicy:
        """The blocks' jail, from the limits and the executor's options (as the jailed kernel's)."""
        return policy_for(
            self.limits,
            workspace=workspace,
            env=inside,
            rlimits=self._rlimits(),
            readonly=readonly,
            tmp_bytes=self.tmp_size_mb << 20,
            hostname=self.hostname,
            seccomp=self.seccomp,
            gpu=self._gpu,
        )

    def _open_egress(self) -> Egress:
        lease = self._lease
        try:
            return open_egress(
                self._jailer.become,
                backend=self.name,
                reachable_dir=lambda path: lease is None or reachable(path, lease.uid, lease.gid),
            )
        except BackendUnavailableError as exc:
            if not container():
                raise
            said = str(exc).removeprefix(f"{self.name} backend unavailable: ")
            raise BackendUnavailableError(
                self.name, f"{said}; in this container the network on needs {NETWORK_ISOLATION}"
            ) from None

    def _jail_runner(self, **parts: Any) -> JailRunner:
        """The runner of this executor's blocks (``parts``: the pool, the Landlock tier, ...)."""
        assert self._python is not None
        overhead = 0 if self._zygote_kept else ONE_SHOT_OVERHEAD
        return JailRunner(
            self._policy,
            timeout_s=self.limits.timeout_s,
            output_limit=self.limits.max_output_bytes,
            python=self._python,
            make_cgroup=cgroup_maker(self._cgroups, self._policy, overhead),
            gpu_watch=self._gpu_watch or no_watch,
            **parts,
        )

    def _make_pool(self, bwrap: str, policy: JailPolicy) -> ZygotePool:
        """The warm pool: its zygote's jail is the blocks' policy with the
        zygote's folder bound, the zygote's environment, and its seccomp
        profile applied by the zygote itself (the units' by each unit)."""
        assert self._python is not None
        # the interpreter's folder first: the zygote starts by the interpreter's bare name (by_name)
        zygote_path = f"{self.environment.bin_dir(self._python)}:{INSIDE_PATH}"
        zygote_env = {"PATH": zygote_path, "HOME": "/tmp", "TMPDIR": "/tmp", "LANG": "C.UTF-8"}
        zygote = replace(
            policy,
            extra_readonly=((str(ZYGOTE_SOURCE), ZYGOTE_INSIDE),),
            seccomp="zygote" if policy.seccomp else None,
            env=tuple(zygote_env.items()),
        )
        config = box_config(
            policy,
            zygote,
            preload=self.preload,
            rlimits=self._block_rlimits(),
            pid_namespace=self._gpu is None,  # the driver refuses CUDA below a nested one (_gpu)
        )
        jailer = self._jailer
        netns, userns = self._egress.join() if self._egress is not None else (None, None)
        return ZygotePool(
            lambda command: prepare(
                bwrap,
                zygote,
                command,
                jailer=jailer,
                netns=netns,
                userns=userns,
                seccomp=False,
                rlimits=False,
            ),
            by_name(self._python, zygote_path),
            policy.workspace,
            config,
            size=1 if self.stateful else self.pool_size,
            make_cgroup=cgroup_maker(self._cgroups, policy, 1),  # the box's init is in its cgroup
            owner=self._lease,
        )

    def _probe_namespaces(self, bwrap: str, readonly: list[str]) -> str | None:
        """Whether bubblewrap starts a jail here: None, else why not (raised
        for ``isolation="namespaces"``)."""
        # .execbox/ (the blocks' code files) is read-only in the jail: no block can leave a
        # set-ID program there, so runs need not walk it (it grows by a file a block)
        os.close(
            open_folders(self.workspace.path, (INTERNAL_DIR, "code"), INTERNAL_DIR, create=True, repair=True)
        )
        try:  # the Jailer raises where the jail id cannot be shown its paths (_identity, _acl)
            self._jailer = Jailer(
                self._lease,
                [*readonly, self._policy.workspace, *([str(ZYGOTE_SOURCE)] if self._zygote_kept else [])],
            )
            launch = prepare(  # bwrap's own start: without the egress namespace, made later
                bwrap,
                replace(self._policy, network=False),
                ["/bin/true"],
                jailer=self._jailer,
                seccomp=False,
                rlimits=False,
            )
            try:
                probe(launch.argv, launch.preexec, launch.pass_fds)
            finally:
                launch.close()
        except BackendUnavailableError as exc:
            if self.isolation == "namespaces":
                raise
            return str(exc).removeprefix(f"{self.name} backend unavailable: ")
        return None

    def _start_namespaces(self, bwrap: str) -> None:
        """The namespaces tier, once bubblewrap has started a jail here: the
        jails' network namespace, the warm pool, and the runner the executor
        picks (the pool's, one-shot jails', or the stateful session's)."""
        self._bwrap = bwrap
        policy = self._policy
        one_shot = not self._zygote_kept
        if self.limits.network:  # every jail (the zygote too) joins the egress namespace
            self._egress = self._open_egress()
            self._netns = self._egress.netns
            self._policy = policy = replace(policy, joined_netns=True, resolv_conf=self._egress.resolv_conf)
        elif one_shot:  # one-shot jails join one empty network namespace
            self._netns = empty_netns(self._jailer.become)
            if self._netns is not None:
                self._policy = replace(policy, joined_netns=True)
        if self._zygote_kept:
            self._zygote = self._make_pool(bwrap, policy)
            self._zygote.start()
        self._runner = jail = self._jail_runner(
            bwrap=bwrap,
            jailer=self._jailer,
            netns=self._netns,
            userns=self._egress.join()[1] if self._egress is not None else None,
            zygote=self._zygote,
        )
        if self.stateful:  # a pool (stateful=True needs one): its session runs the blocks
            assert self._zygote is not None
            self._runner = self._stateful = StatefulRunner(self, jail, self._zygote)
        self.isolation_in_use = "namespaces"
        self._blocks_write_internal = False

    def _start_landlock(self, why: str | None) -> None:
        """The Landlock tier; ``why``: what kept the namespaces tier from starting."""
        assert self._python is not None
        self._jailer.close()
        self._jailer = Jailer(None, ())
        if self.stateful:
            raise BackendUnavailableError(
                self.name,
                f"stateful=True needs the namespaces tier, which cannot start "
                f"here ({why}; {NAMESPACES_HINT}); set stateful=False to run "
                "blocks in the Landlock tier (isolation='landlock')",
            )
        refuse_network(bool(self.limits.network), why or "")
        problem = landlock_problem()
        if problem is not None:
            local = "or run unisolated with backend='local' (CLI: --backend local)"
            cause = (why or "").replace(f", {local}", "").replace(f"; {local}", "")
            raise BackendUnavailableError(
                self.name,
                (
                    f"neither isolation tier can run here. Namespaces: {cause} ({NAMESPACES_HINT}). "
                    f"Landlock: {problem}; {LANDLOCK_HINT}"
                    if why
                    else f"the Landlock tier cannot run here: {problem}; {LANDLOCK_HINT}"
                )
                + f"; {local}. `execbox doctor` checks this host and names each fix",
            )
        self._landlock = LandlockTier(self._policy, lease=self._lease)
        self._landlock.probe(self._python)
        self._runner = self._jail_runner(landlock=self._landlock)
        self.isolation_in_use = "landlock"
        self._blocks_write_internal = True  # Landlock grants the workspace whole
        preload = "; preload is not used (no warm pool in this tier)" if self.preload else ""
        warn_weaker((why or "isolation='landlock' was asked for") + preload)
