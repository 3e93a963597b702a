"""Whether execbox runs inside a container, and the ``docker run`` options
that let the sandbox's namespaces tier start there.

A container started with the engine's defaults refuses bubblewrap: its
seccomp profile refuses user namespaces, its AppArmor profile (on hosts
with AppArmor) mounts, and its masked /proc paths make the kernel refuse
bubblewrap's own /proc; and its root lacks CAP_SYS_ADMIN, without which
root can neither stage the jail's paths in a mount namespace nor join the
namespaces it made for the jails (the one-shot jails' network namespace,
the egress one). Measured in a ``docker run`` of Debian bookworm
(scripts/fresh-container.sh; tests/security/test_fresh_container.py):
without ``systempaths=unconfined`` bubblewrap fails with "Can't mount proc
on /newroot/proc: Operation not permitted"; without ``seccomp=unconfined``
with "pivot_root: Operation not permitted"; without ``SYS_ADMIN`` blocks
run in a warm pool (the ACL entry of ``_acl`` lets the jail id reach
/root) but a one-shot jail's start fails on joining its network namespace.
The container then holds CAP_SYS_ADMIN: the blocks never do (bubblewrap
runs as the jail id, every capability dropped).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["FULL_ISOLATION", "FULL_ISOLATION_OPTIONS", "NETWORK_ISOLATION", "NETWORK_OPTIONS", "container"]

FULL_ISOLATION_OPTIONS = (
    "--cap-add SYS_ADMIN",
    "--security-opt seccomp=unconfined",
    "--security-opt apparmor=unconfined",
    "--security-opt systempaths=unconfined",
)
FULL_ISOLATION = "`docker run " + " ".join(FULL_ISOLATION_OPTIONS) + " ...`"
# Limits(network=True) in the namespaces tier, on top: root opens the egress namespace of a
# process of the jail id (/proc/PID/ns: CAP_SYS_PTRACE), slirp4netns its tap device
# (/dev/net/tun), and root installs the namespace's routing rules (CAP_NET_ADMIN); measured as
# FULL_ISOLATION's options were, each refused without it
NETWORK_OPTIONS = ("--cap-add SYS_PTRACE", "--cap-add NET_ADMIN", "--device /dev/net/tun")
NETWORK_ISOLATION = "`docker run " + " ".join((*FULL_ISOLATION_OPTIONS, *NETWORK_OPTIONS)) + " ...`"


def container() -> str:
    """What shows this process runs in a container ("" where nothing does)."""
    if Path("/.dockerenv").exists():
        return "/.dockerenv exists: a Docker container"
    if Path("/run/.containerenv").exists():
        return "/run/.containerenv exists: a Podman container"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return "KUBERNETES_SERVICE_HOST is set: a Kubernetes pod"
    return ""
