"""How the sandbox holds each limit on this host, and what would make a
missing one hold: read by ``SandboxExecutor.capabilities``, its warning for
a limit it cannot hold, and ``execbox doctor``.

The mechanisms, strongest first:
- a cgroup per block (memory, pids, CPU): root, or a delegated cgroup v2
  subtree (``systemd-run --user --scope -p Delegate=yes``);
- rlimits where no cgroup is: RLIMIT_AS for memory (an allocation fails, the
  block sees MemoryError), RLIMIT_NPROC for processes, set inside the
  block's own user namespace, where it counts the block's processes only;
- nothing for CPU: without a cgroup a block may use every core until its
  timeout.
"""

from __future__ import annotations

from ...jail import CgroupSupport

__all__ = ["CGROUP_FIX", "NPROC_IN_USERNS", "Enforcement", "enforcement"]

CGROUP_FIX = (
    "a cgroup of its own: run as root, or in a delegated cgroup v2 subtree "
    "(systemd-run --user --scope -p Delegate=yes <your command>); `execbox doctor` says what this "
    "host lacks"
)


class Enforcement:
    """Limit name -> how it holds (``held``) or why not and the fix (``missing``)."""

    def __init__(self, held: dict[str, str], missing: dict[str, str]) -> None:
        self.held = held
        self.missing = missing


NPROC_IN_USERNS = "RLIMIT_NPROC in the block's own user namespace"


def enforcement(
    cgroups: CgroupSupport | None, *, nproc: str | None, network: str, network_held: bool = True
) -> Enforcement:
    """``cgroups``: the per-block groups this executor uses (None: none);
    ``nproc``: how RLIMIT_NPROC bounds processes, if it does
    (``NPROC_IN_USERNS``: the block's own); ``network``: what cuts the
    network off when Limits.network is False."""
    held = {
        "timeout_s": "a timer; every process the block started is killed (its cgroup, or its marker "
        "in the environment)",
        "max_output_bytes": "execbox keeps the head and the tail of the output",
    }
    missing: dict[str, str] = {}
    version = f"cgroup v{cgroups.version}" if cgroups is not None else ""
    if cgroups is not None:
        held["memory_mb"] = f"a memory {version} per block (the kernel kills the block at the limit)"
        held["cpus"] = f"a cpu {version} quota per block"
        held["max_processes"] = f"a pids {version} per block" + (f", and {nproc}" if nproc else "")
    else:
        held["memory_mb"] = (
            "RLIMIT_AS, the address space (no memory cgroup here; RLIMIT_DATA for Node.js, a JVM and "
            "Go, which reserve far more than they use): an allocation over the limit fails, and the "
            "result names Limits.memory_mb"
        )
        missing["cpus"] = f"no CPU quota without a cgroup: the block may use every core; needs {CGROUP_FIX}"
        if nproc:
            held["max_processes"] = f"{nproc} (no pids cgroup here)"
        else:
            missing["max_processes"] = f"no process limit here: needs {CGROUP_FIX}"
    if network_held:
        held["network"] = network
    else:
        missing["network"] = network
    return Enforcement(held, missing)
