"""The sandbox's GPUs (``SandboxExecutor(gpus=...)``): what the jail policy
gains for a ``GpuGrant`` (``execbox._gpus``), and how each way of running
a block holds a GPU.

- one-shot (``pool=False``), and the pool's stateless blocks: a jail of
  bubblewrap's per block, its own PID namespace included: CUDA initialises
  in every one. A pooled GPU executor runs its blocks this way: a unit
  forked by the zygote lives in a PID namespace below the jail's, and the
  NVIDIA driver refuses ``cuInit`` there (error 304, measured on an H200
  host).
- the stateful session (``stateful=True``): its one unit has no PID
  namespace of its own; its init is the subreaper of the session's
  processes and kills them when it leaves (``_zygote/tree.py``), and the
  block's cgroup is emptied by the host. What that leaves: the session's
  processes see and may signal the executor's own zygote and init (same
  jail, same id), never another executor's.
- memory: with GPUs the limit is the cgroup's only. An address-space limit
  (RLIMIT_AS, the stand-in where no memory cgroup exists) makes CUDA fail
  at start below tens of GB, so without a memory cgroup a GPU block's host
  memory is not limited, and ``capabilities`` says so.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace

from .._errors import UnenforcedLimitWarning
from .._gpus import GpuGrant
from ._cgroups import BlockGroup
from ._nvml import POLL_S, GpuMemoryWatch, gpu_memory
from ._policy import JailPolicy

__all__ = [
    "GPU_MEMORY_GAP",
    "GpuWatcher",
    "gpu_environment",
    "gpu_mechanism",
    "gpu_memory_watcher",
    "gpu_policy",
    "no_watch",
]

GpuWatcher = Callable[[BlockGroup | None], AbstractContextManager[GpuMemoryWatch | None]]


def no_watch(group: BlockGroup | None) -> AbstractContextManager[GpuMemoryWatch | None]:
    """The watcher of a block with no ``Limits.gpu_memory_mb`` to hold: none."""
    return nullcontext(None)


GPU_MEMORY_GAP = (
    "not limited for GPU blocks here: RLIMIT_AS, the stand-in without a memory cgroup, makes CUDA "
    "fail at start; needs a memory cgroup (run as root, or in a delegated cgroup v2 subtree)"
)


def gpu_policy(policy: JailPolicy, given: GpuGrant) -> JailPolicy:
    """The policy with the granted device nodes and driver folders bound."""
    extra = tuple((p, p) for p in given.readonly if (p, p) not in policy.extra_readonly)
    return replace(policy, devices=given.nodes, extra_readonly=policy.extra_readonly + extra)


def gpu_environment(inside: dict[str, str], given: GpuGrant) -> dict[str, str]:
    """The blocks' environment with the grant's variables (what the caller
    set wins), the driver's folders on PATH and LD_LIBRARY_PATH."""
    out = dict(inside)
    for key, value in given.env:
        out.setdefault(key, value)
    if given.bin_path:
        out["PATH"] = os.pathsep.join([*filter(None, out.get("PATH", "").split(os.pathsep)), *given.bin_path])
    if given.library_path:
        out["LD_LIBRARY_PATH"] = os.pathsep.join(
            [*given.library_path, *filter(None, out.get("LD_LIBRARY_PATH", "").split(os.pathsep))]
        )
    return out


def gpu_mechanism(given: GpuGrant, *, pool: bool, stateful: bool) -> str:
    """How the executor's blocks hold their GPUs, for ``capabilities``."""
    names = ", ".join(f"GPU {g.index}" + (f" ({g.uuid})" if g.uuid else "") for g in given.gpus)
    if stateful:
        how = (
            "the session's unit has no PID namespace of its own (the driver refuses a nested one): "
            "its processes may signal the executor's own zygote and init"
        )
    elif pool:
        how = (
            "each block in a jail of its own, not a pool unit "
            "(the driver refuses a unit's nested PID namespace)"
        )
    else:
        how = "each block in a jail of its own"
    return f"{names}: only their device nodes bound; {how}"


def gpu_memory_watcher(
    given: GpuGrant | None, limit_mb: int | None, has_cgroups: bool
) -> tuple[GpuWatcher | None, str]:
    """(what watches a block's GPU memory, how) for ``Limits.gpu_memory_mb``,
    or (None, why it cannot be held here, warned); (None, "") when it is not set."""
    if limit_mb is None:
        return None, ""
    if given is None:
        return None, "no GPU is given to the blocks (gpus=...)"
    nvml, why = gpu_memory()
    if not has_cgroups:
        why = "needs a cgroup per block to know the block's processes (run as root, or delegated)"
    if nvml is None or not has_cgroups:
        warnings.warn(
            f"the sandbox cannot enforce Limits gpu_memory_mb here: it is ignored ({why})",
            UnenforcedLimitWarning,
            stacklevel=6,
        )
        return None, why
    minors = [g.index for g in given.gpus]

    def watch(group: BlockGroup | None) -> AbstractContextManager[GpuMemoryWatch | None]:
        if group is None:
            return nullcontext(None)
        return GpuMemoryWatch(nvml, minors, limit_mb, group.pids, group.kill)

    how = (
        f"NVML's GPU memory of the block's processes (its cgroup's), read every {POLL_S * 1000:.0f} ms; "
        "the block is killed past the limit"
    )
    return watch, how
