"""A jail from ``Limits``: the one place the limits become what holds a
jail, for the sandbox backend's blocks and the jailed Jupyter kernel alike.

``policy_for`` builds the ``JailPolicy``: the workspace (its internal
folder sealed), the network, the memory, process and CPU limits (their
effective defaults), the jail's environment and rlimits, and a GPU grant's
nodes, folders and variables (``_gpu``). What differs between the two
callers is a parameter: the sandbox's options (``tmp_bytes``,
``hostname``, ``seccomp``, the interpreter's folders) and each one's
rlimits. ``cgroup_maker`` makes a block's cgroup from the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from .._gpus import GpuGrant
from .._models import Limits
from .._workspace import INTERNAL_DIR
from ._cgroups import BlockCgroup, CgroupSupport
from ._gpu import gpu_environment, gpu_policy
from ._policy import JailPolicy

__all__ = ["cgroup_maker", "policy_for"]


def policy_for(
    limits: Limits,
    *,
    workspace: str,
    env: Mapping[str, str],
    rlimits: Mapping[str, int],
    readonly: Sequence[str] = (),
    tmp_bytes: int = JailPolicy.tmp_bytes,
    hostname: str = JailPolicy.hostname,
    seccomp: bool = True,
    gpu: GpuGrant | None = None,
) -> JailPolicy:
    """The jail of ``workspace`` under ``limits``: ``env`` is all it sees
    of an environment (plus the GPU's variables with ``gpu``), ``rlimits``
    are set before it starts (names without RLIMIT_), ``readonly`` host
    folders are bound as they are (the interpreter's), ``seccomp`` applies
    the blocks' profile."""
    policy = JailPolicy(
        workspace=workspace,
        readonly=tuple(readonly),
        sealed=(INTERNAL_DIR,),
        network=bool(limits.network),
        tmp_bytes=tmp_bytes,
        hostname=hostname,
        seccomp="block" if seccomp else None,
        rlimits=tuple(rlimits.items()),
        memory_mb=limits.effective_memory_mb(),
        max_processes=limits.effective_max_processes(),
        cpus=limits.cpus,
        env=tuple((env if gpu is None else gpu_environment(dict(env), gpu)).items()),
    )
    return policy if gpu is None else gpu_policy(policy, gpu)


def cgroup_maker(
    support: CgroupSupport | None, policy: JailPolicy, overhead: int
) -> Callable[[], BlockCgroup | None]:
    """What makes one block's cgroup under the policy's limits (``overhead``:
    processes of ours that count in it); None from it without cgroups."""

    def make() -> BlockCgroup | None:
        if support is None:
            return None
        processes = policy.max_processes
        return support.create(
            memory_mb=policy.memory_mb,
            cpus=policy.cpus,
            max_processes=None if processes is None else processes + overhead,
        )

    return make
