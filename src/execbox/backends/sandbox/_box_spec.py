"""What a pool's box is made of, as the host tells the zygote (the settings
sent on its socket, ``_zygote/zygote.py`` and ``_zygote/box.py`` read them),
and the same as lines a golden file pins (tests/fixtures/jail/pool-box.txt):
the box's namespaces, its /tmp and /dev/shm, the paths kept under /tmp,
each block's limits, filter and environment, and what is undone after each
block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...jail import JailPolicy

__all__ = ["box_config", "box_lines"]


def box_config(
    policy: JailPolicy,
    zygote: JailPolicy,
    *,
    preload: Sequence[str],
    rlimits: Mapping[str, int],
    pid_namespace: bool,
) -> dict[str, Any]:
    """The settings the zygote gets: ``policy`` is the blocks' jail,
    ``zygote`` the zygote's own (its seccomp profile); the blocks'
    environment is set in each block's process, never in the zygote."""
    keep = [p for p in (policy.workspace, *policy.readonly) if p == "/tmp" or p.startswith("/tmp/")]
    return {
        "preload": list(preload),
        "keep": keep,
        "cwd": policy.workspace,
        "tmp_bytes": policy.tmp_bytes,
        "rlimits": dict(rlimits),
        "seccomp": (policy.seccomp_program() or b"").hex(),
        "zygote_seccomp": (zygote.seccomp_program() or b"").hex(),
        "env": dict(policy.env),
        "pid_namespace": pid_namespace,  # False for a GPU's: the driver refuses CUDA below a nested one
    }


def _program(hex_program: str) -> str:
    # set or not: the program itself differs by machine (seccomp-*-x86_64.txt and -aarch64.txt pin it)
    return "set" if hex_program else "none"


def box_lines(config: Mapping[str, Any]) -> list[str]:
    """A box's settings, one fact a line (the golden file's text)."""
    own = "mount, pid" if config["pid_namespace"] else "mount (no pid: its init is the subreaper)"
    return [
        f"box namespaces (made once, kept): {own}",
        "each block's namespaces: ipc, user (nested, the same ids mapped)",
        f"/tmp: tmpfs of {config['tmp_bytes']} bytes, mode 1777, emptied after each block",
        f"/dev/shm: tmpfs of {config['tmp_bytes']} bytes, mode 1777, emptied after each block",
        *(f"kept under /tmp (bound, never emptied): {path}" for path in config["keep"]),
        f"each block starts in: {config['cwd']}",
        "cgroup: the box's own, the init in it; each block's processes born in it",
        *(f"rlimit {name}: {value}" for name, value in sorted(config["rlimits"].items())),
        f"block seccomp: {_program(config['seccomp'])} (the block profile)",
        f"zygote seccomp: {_program(config['zygote_seccomp'])} (the zygote profile)",
        f"block environment: {', '.join(sorted(config['env'])) or '(empty)'}",
        f"preload: {', '.join(config['preload']) or '(none)'}",
        "after each block: every process left killed (kill(-1) from the box's init), "
        "/tmp and /dev/shm emptied, the folders to the kept paths checked; else the box is replaced",
    ]
