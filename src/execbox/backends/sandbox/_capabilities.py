"""``SandboxExecutor.capabilities``: what the executor holds on this host,
for its tier, its cgroups and its GPUs (``_enforcement`` says how each
limit holds; ``_gpu`` what a GPU block gets)."""

from __future__ import annotations

import os
from typing import Any

from ..._languages import runnable_languages
from ...jail import GPU_MEMORY_GAP, INSIDE_PATH, cgroup_support, gpu_mechanism
from .._executor_api import Capabilities
from ._enforcement import NPROC_IN_USERNS, enforcement
from ._runner import prlimit

__all__ = ["sandbox_capabilities"]


def sandbox_capabilities(ex: Any) -> Capabilities:
    """``ex``: a ``SandboxExecutor``, read for its options, tier and GPUs."""
    cgroups = cgroup_support()[0] if ex.cgroups else None
    if (ex.isolation_in_use or ex.isolation) == "landlock":
        nproc = (
            "RLIMIT_NPROC of the executor's own jail id (its blocks' processes together)"
            if os.geteuid() == 0
            else "RLIMIT_NPROC, which here counts every process of the user, not the block's alone"
        )
        held = enforcement(
            cgroups,
            nproc=nproc,
            network="seccomp: unix datagram sockets only (no stream: "
            "Landlock does not mediate connect), TCP refused by Landlock",
        )
    else:
        held = enforcement(
            cgroups,
            nproc=NPROC_IN_USERNS if ex._zygote_kept or prlimit() else None,
            network="an empty network namespace (the block has only a loopback of its own)",
        )
    if ex.gpus is not None and cgroups is None:
        del held.held["memory_mb"]
        held.missing["memory_mb"] = GPU_MEMORY_GAP
    if ex.limits.gpu_memory_mb is not None:  # how it holds (or why not) is known at start
        if ex._gpu_watch is not None or (not ex._gpu_watch_how and ex.gpus is not None):
            held.held["gpu_memory_mb"] = ex._gpu_watch_how or "NVML, read while the block runs"
        else:
            held.missing["gpu_memory_mb"] = ex._gpu_watch_how or "no GPU is given to the blocks (gpus=...)"
    mechanisms = dict(held.held)
    if ex._gpu is not None:
        mechanisms["gpus"] = gpu_mechanism(ex._gpu, pool=ex.pool, stateful=ex.stateful)
    return Capabilities(
        backend=ex.name,
        isolated=True,
        stateful=ex.stateful,
        enforced=frozenset(held.held),
        languages=runnable_languages(INSIDE_PATH),
        mechanisms=mechanisms,
        gaps=held.missing,
    )
