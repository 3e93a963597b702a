"""What the sandbox gets on this host, for this user: the isolation tier the
default backend picks, how each limit holds, and for each thing missing the
exact fix. ``execbox doctor`` prints it; a sandbox that cannot start points
there.

Every finding is read or tried here, not assumed: bubblewrap is started for
real, a block is run in each tier that can start.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ... import _gpus
from ..._gpus import DRIVER_HINT, describe, grant, host_gpus
from ...jail import FULL_ISOLATION, CgroupSupport, cgroup_support, container
from ...jail import landlock as ll
from ._landlock_tier import LANDLOCK_HINT, landlock_problem

__all__ = ["APPARMOR_PROFILE", "Diagnosis", "Finding", "diagnose"]

APPARMOR_SYSCTL = Path("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
APPARMOR_PROFILE = """abi <abi/4.0>,
include <tunables/global>

profile bwrap /usr/bin/bwrap flags=(unconfined) {
  userns,

  include if exists <local/bwrap>
}
"""
APPARMOR_FIX = (
    "AppArmor refuses user namespaces to unconfined programs "
    "(kernel.apparmor_restrict_unprivileged_userns=1). Allow bubblewrap alone: write this profile to "
    "/etc/apparmor.d/bwrap and run `sudo apparmor_parser -r /etc/apparmor.d/bwrap` (Ubuntu 25.04+ "
    "ships one: bwrap-userns-restrict), or for every program: "
    "`sudo sysctl kernel.apparmor_restrict_unprivileged_userns=0`"
)
CONTAINER_FIX = (
    "bubblewrap needs user namespaces and a /proc of its own, which the container's seccomp profile, "
    "AppArmor profile and masked /proc paths refuse, and root needs CAP_SYS_ADMIN to set up the jails: "
    f"for the namespaces tier start the container with {FULL_ISOLATION} (the blocks get no capability), "
    "or let execbox use the Landlock tier (what it leaves visible is listed below)"
)
CGROUP_FIX = (
    "run under a delegated cgroup: `systemd-run --user --scope -p Delegate=yes <your command>` (or as "
    "root); the limits then hold with a cgroup per block"
)


@dataclass
class Finding:
    """One thing checked: ``ok``, what was seen, and the fix when not ok."""

    name: str
    ok: bool
    seen: str
    fix: str = ""


@dataclass
class Diagnosis:
    user: str
    root: bool
    tier: str  # the tier the default sandbox gets: "namespaces", "landlock" or "none"
    findings: list[Finding] = field(default_factory=list)
    limits: dict[str, str] = field(default_factory=dict)  # limit -> how it holds
    gaps: dict[str, str] = field(default_factory=dict)  # limit -> why not, and the fix
    hidden: list[str] = field(default_factory=list)  # what the tier hides from a block
    exposed: list[str] = field(default_factory=list)  # what it does not
    pool: dict[str, object] | None = None  # the warm pool's health after a few blocks (namespaces tier)
    gpus: dict[str, object] = field(default_factory=dict)  # the host's GPUs and how blocks may get them

    def to_json(self) -> dict[str, object]:
        return asdict(self)


# tier -> (what a block cannot see or reach, what it can)
TIERS = {
    "namespaces": (
        [
            "host files outside the system folders, the interpreter and the workspace",
            "host processes (a PID namespace of its own)",
            "the host's network (an empty one)",
            "host IPC objects and /dev/shm",
            "the host's /dev (a minimal one)",
        ],
        ["the system folders, read-only (/usr, /etc...)", "the kernel's version and CPU count"],
    ),
    "landlock": (
        [
            "host files outside the system folders, the interpreter and the workspace (Landlock)",
            "TCP and UDP (socket() of AF_UNIX only, when the network is off)",
            "unix stream sockets: none can be made (the Docker socket, a session D-Bus)",
            "host SysV IPC and POSIX queues (seccomp)",
            "signals to and abstract sockets of processes outside the block (Landlock ABI 6+)",
        ],
        [
            "host processes and their command lines in /proc",
            "the host's interfaces in /proc/net",
            "the host's name, /dev nodes (only null, zero, full, random open), /dev/shm",
            "the system folders, read-only",
        ],
    ),
}


def diagnose(*, try_blocks: bool = True) -> Diagnosis:
    """Look at this host (``try_blocks``: also run a block in each tier)."""
    from ...jail import find_bwrap

    uid = os.geteuid()
    user = _user_name(uid)
    bwrap = find_bwrap()
    found = [_bwrap_finding(bwrap)]
    found += _namespaces_findings()
    namespaces_ok, why = _try_tier("namespaces") if bwrap and try_blocks else (False, "not tried")
    found.append(
        Finding(
            "the namespaces tier starts",
            namespaces_ok,
            "a block ran" if namespaces_ok else why,
            "" if namespaces_ok else _namespaces_fix(found),
        )
    )
    support, reason = cgroup_support()
    found.append(_cgroup_finding(support, reason))
    where = container()
    if where:  # a finding only where it stops bubblewrap
        found.append(
            Finding("inside a container", namespaces_ok, where, "" if namespaces_ok else CONTAINER_FIX)
        )
    landlock = landlock_problem()
    found.append(_landlock_finding(landlock))
    landlock_ok = False
    if landlock is None and try_blocks and not namespaces_ok:
        landlock_ok, why = _try_tier("landlock")
        found.append(Finding("the Landlock tier starts", landlock_ok, "a block ran" if landlock_ok else why))
    tier = "namespaces" if namespaces_ok else "landlock" if landlock_ok else "none"
    diagnosis = Diagnosis(user=user, root=uid == 0, tier=tier, findings=found)
    if namespaces_ok and try_blocks:
        found.append(_pool_finding(diagnosis))
    if tier != "none":
        _limits_of(diagnosis, tier)
        diagnosis.hidden, diagnosis.exposed = TIERS[tier]
    diagnosis.gpus = _gpus_of(namespaces_ok, landlock is None, support is not None)
    return diagnosis


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (KeyError, ImportError):
        return str(uid)


def _bwrap_finding(bwrap: str | None) -> Finding:
    return Finding(
        "bubblewrap installed",
        bwrap is not None,
        bwrap or "bwrap is not on PATH",
        "" if bwrap else "sudo apt-get install bubblewrap (Debian, Ubuntu)",
    )


def _cgroup_finding(support: CgroupSupport | None, reason: str) -> Finding:
    return Finding(
        "a cgroup per block",
        support is not None,
        f"cgroup v{support.version} under {sorted(set(map(str, support.bases.values())))[0]}"
        if support is not None
        else reason,
        "" if support is not None else _cgroup_fix(),
    )


def _landlock_finding(problem: str | None) -> Finding:
    return Finding(
        "Landlock (the tier without namespaces)",
        problem is None,
        f"ABI {ll.abi()}" if problem is None else problem,
        "" if problem is None else LANDLOCK_HINT,
    )


def _pool_finding(diagnosis: Diagnosis) -> Finding:
    """Whether the warm pool serves blocks: its counters go in ``diagnosis.pool``."""
    diagnosis.pool, why = _try_pool()
    healthy = diagnosis.pool is not None and not any(diagnosis.pool[k] for k in POOL_FAULTS)
    return Finding(
        "the warm pool serves blocks",
        healthy,
        why,
        ""
        if healthy
        else "SandboxExecutor(pool=False) runs a jail per block (slower) while this is looked into",
    )


def _gpus_of(namespaces: bool, landlock: bool, memory_cgroup: bool) -> dict[str, object]:
    """The host's NVIDIA GPUs, its driver, and which tiers can give a block one (and why not)."""
    host = _gpus.GpuHost()  # the module's, looked up now (tests point it at a folder of nodes)
    gpus = host_gpus(host)
    if not gpus:
        return {"found": [], "fix": f"no /dev/nvidia0 here: {DRIVER_HINT.removesuffix(', or drop gpus')}"}
    given = grant("all", host)
    tiers = {
        "namespaces": "yes: one-shot and pooled blocks each in a jail of their own; the stateful session "
        "in a unit without a nested PID namespace"
        if namespaces
        else "no: the namespaces tier does not start here (above)",
        "landlock": "yes: the GPUs' device nodes are allowed, nothing else of /dev"
        if landlock
        else "no: Landlock is not available here (above)",
        "docker": "with the NVIDIA Container Toolkit on the engine's host (device_requests)",
    }
    return {
        "found": describe(gpus),
        "driver": host.driver_version() or "unknown (no /proc/driver/nvidia/version)",
        "nodes": [inside for _, inside in given.nodes] if given else [],
        "tiers": tiers,
        "memory": "held by the cgroup per block"
        if memory_cgroup
        else "not limited for GPU blocks: no memory cgroup here, and RLIMIT_AS breaks CUDA",
    }


def _namespaces_findings() -> list[Finding]:
    found = []
    apparmor = _read(APPARMOR_SYSCTL)
    if apparmor == "1" and os.geteuid() != 0:
        found.append(
            Finding(
                "AppArmor lets bubblewrap make user namespaces",
                _bwrap_profile_loaded(),
                "kernel.apparmor_restrict_unprivileged_userns=1",
                "" if _bwrap_profile_loaded() else APPARMOR_FIX + ":\n" + APPARMOR_PROFILE,
            )
        )
    for path, name, fix in (
        (
            Path("/proc/sys/user/max_user_namespaces"),
            "user.max_user_namespaces",
            "sudo sysctl user.max_user_namespaces=15000",
        ),
        (
            Path("/proc/sys/kernel/unprivileged_userns_clone"),
            "kernel.unprivileged_userns_clone",
            "sudo sysctl kernel.unprivileged_userns_clone=1",
        ),
    ):
        value = _read(path)
        if value == "0":
            found.append(Finding(f"{name} allows user namespaces", False, f"{name}=0", fix))
    return found


def _cgroup_fix() -> str:
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():  # cgroup v2
        return CGROUP_FIX
    return (
        "this host mounts cgroup v1, where only root makes groups: run as root, or on a cgroup v2 host "
        "under `systemd-run --user --scope -p Delegate=yes <your command>`"
    )


def _namespaces_fix(found: list[Finding]) -> str:
    for finding in found:
        if not finding.ok and finding.fix:
            return finding.fix
    if container():
        return CONTAINER_FIX
    return "see the error above; `execbox run --backend local` runs unisolated"


def _bwrap_profile_loaded() -> bool:
    text = _read(Path("/sys/kernel/security/apparmor/profiles")) or ""
    return any(line.split(" ")[0] in ("bwrap", "bwrap-userns-restrict") for line in text.splitlines())


def _try_tier(tier: str) -> tuple[bool, str]:
    """Run ``print(6*7)`` in a sandbox of ``tier``: (it printed 42, or why not)."""
    import warnings

    from ..._errors import ExecboxError
    from ..._models import CodeBlock, Limits
    from ..._workspace import Workspace
    from . import SandboxExecutor

    with tempfile.TemporaryDirectory(prefix="execbox-doctor-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with SandboxExecutor(
                workspace=Workspace(folder), pool=False, limits=Limits(timeout_s=30), isolation=tier
            ) as sandbox:
                result = sandbox.run(CodeBlock("python", "print(6*7)"))
        except ExecboxError as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 (the diagnosis goes on: this finding says what broke)
            return False, f"{type(exc).__name__}: {exc}"
    return result.output == "42\n", result.output.strip()[:300]


POOL_FAULTS = ("refills_failed", "zygote_restarts", "stalls")


def _try_pool() -> tuple[dict[str, object] | None, str]:
    """Sixteen ``print(i)`` from four threads through a warm pool: its
    health after them (None and why if it could not run them)."""
    import warnings
    from concurrent.futures import ThreadPoolExecutor

    from ..._errors import ExecboxError
    from ..._models import CodeBlock, Limits
    from ..._workspace import Workspace
    from . import SandboxExecutor

    with tempfile.TemporaryDirectory(prefix="execbox-doctor-") as folder, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            with SandboxExecutor(
                workspace=Workspace(folder), limits=Limits(timeout_s=30), isolation="namespaces"
            ) as sandbox:
                with ThreadPoolExecutor(4) as threads:
                    outputs = list(
                        threads.map(
                            lambda i: sandbox.run(CodeBlock("python", f"print({i})")).output, range(16)
                        )
                    )
                health = sandbox.pool_health
        except ExecboxError as exc:
            return None, str(exc)
        except Exception as exc:  # noqa: BLE001 (as in _try_tier)
            return None, f"{type(exc).__name__}: {exc}"
    wrong = sum(out != f"{i}\n" for i, out in enumerate(outputs))
    if health is None:
        return None, "no pool was started"
    seen = (
        f"16 blocks from 4 threads, {16 - wrong} right; boxes {health['boxes']} "
        f"(size {health['size']}), made {health['boxes_made']}, replaced {health['boxes_replaced']}; "
        + ", ".join(f"{k.replace('_', ' ')} {health[k]}" for k in POOL_FAULTS)
    )
    return (health if not wrong else None), seen


def _limits_of(diagnosis: Diagnosis, tier: str) -> None:
    from . import SandboxExecutor

    capabilities = SandboxExecutor(isolation=tier).capabilities
    diagnosis.limits = dict(capabilities.mechanisms)
    diagnosis.gaps = dict(capabilities.gaps)


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None
