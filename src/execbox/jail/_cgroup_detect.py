"""Where this process can make cgroups, found once (``_cgroups.cgroup_support``
calls ``detect``): v1, a hierarchy per controller, or v2, one unified
hierarchy, with the groups beside ours where our parent is ours to write,
else inside our own delegated group once its processes moved to a leaf
(``LEAF``); the base folder ``execbox-<pid>`` made, and those of execbox
processes that died without removing theirs removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from ._cgroup_fs import rmdir, write

__all__ = ["CONTROLLERS", "LEAF", "detect"]

CONTROLLERS = ("memory", "pids", "cpu")
# cgroup v2, a delegated group: where its processes go so that it may have children
LEAF = "execbox-leaf"


def detect() -> tuple[tuple[int, dict[str, Path]] | None, str]:
    """(the cgroup version and, per controller, the folder under which this
    process makes its groups; or None, and why none can be made here)."""
    own = _own_cgroups()
    mounts = _cgroup_mounts()
    if "" in own and not any(c in own for c in CONTROLLERS) and "cgroup2" in mounts:
        return _detect_v2(own[""], mounts["cgroup2"])
    bases: dict[str, Path] = {}
    for controller in CONTROLLERS:
        mount = mounts.get(controller)
        if mount is None or controller not in own:
            return None, f"the cgroup v1 '{controller}' controller is not mounted"
        point, root = mount
        base = point / os.path.relpath(own[controller], root) / f"execbox-{os.getpid()}"
        if not _make_base(base):
            return None, f"cannot create {base} (run as root or in a delegated cgroup)"
        bases[controller] = base.resolve()
    return (1, bases), ""


def _detect_v2(own: str, mount: tuple[Path, str]) -> tuple[tuple[int, dict[str, Path]] | None, str]:
    point, root = mount
    current = point / os.path.relpath(own, root)
    if own == root:  # the root group may enable controllers while holding processes
        parent = current
    elif os.access(current.parent / "cgroup.subtree_control", os.W_OK):  # groups beside ours
        parent = current.parent
    elif _owned(current):  # a delegated group (systemd's Delegate=yes): groups inside it
        why = _vacate(current)
        if why:
            return None, why
        parent = current
    else:
        return None, (
            f"cgroup v2: {current} is not delegated to this user, nor is its parent: no group "
            "can be made (run as root, or under systemd-run --user --scope -p Delegate=yes)"
        )
    enabled = set((parent / "cgroup.subtree_control").read_text().split())
    available = set((parent / "cgroup.controllers").read_text().split())
    missing = [c for c in CONTROLLERS if c not in available]
    if missing:
        return None, f"cgroup v2: controllers {', '.join(missing)} are not available in {parent}"
    try:
        for controller in CONTROLLERS:
            if controller not in enabled:
                write(parent / "cgroup.subtree_control", f"+{controller}")
        base = parent / f"execbox-{os.getpid()}"
        if not _make_base(base):
            return None, f"cgroup v2: cannot create {base}"
        write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    except OSError as exc:
        return None, f"cgroup v2: cannot enable {', '.join(CONTROLLERS)} under {parent}: {exc}"
    return (2, {c: base for c in CONTROLLERS}), ""


def _owned(group: Path) -> bool:
    """The group is this process's to divide (what a delegation hands over)."""
    return all(
        os.access(group / name, os.W_OK) for name in ("cgroup.procs", "cgroup.subtree_control")
    ) and os.access(group, os.W_OK)


def _vacate(group: Path) -> str:
    """cgroup v2's rule: a group that holds processes cannot give its
    children controllers. Move every process of ``group`` (this one, and
    the shell a delegated scope may have started in it) into a leaf, so that
    the block groups can be made inside it. '' or why it could not."""
    leaf = group / LEAF
    try:
        leaf.mkdir(exist_ok=True)
        for _ in range(5):  # a process forked meanwhile lands in the group: move it too
            pids = (group / "cgroup.procs").read_text().split()
            for pid in pids:
                try:
                    write(leaf / "cgroup.procs", pid)
                except ProcessLookupError:
                    pass  # it has exited
            if not (group / "cgroup.procs").read_text().split():
                return ""
    except OSError as exc:
        return f"cgroup v2: cannot move the processes of {group} into {leaf} to make groups inside it: {exc}"
    return f"cgroup v2: processes keep arriving in {group}: cannot make groups inside it"


def _own_cgroups() -> dict[str, str]:
    """controller -> our group's path ("" for the v2 hierarchy)."""
    found: dict[str, str] = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(","):
            found[controller] = path
    return found


def _cgroup_mounts() -> dict[str, tuple[Path, str]]:
    """controller (or "cgroup2") -> (mount point, root of the mount)."""
    found: dict[str, tuple[Path, str]] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fields, extra = left.split(), right.split()
        if len(extra) < 3 or len(fields) < 5:
            continue
        point = Path(fields[4].replace("\\040", " "))
        if extra[0] == "cgroup2":
            found.setdefault("cgroup2", (point, fields[3]))
        elif extra[0] == "cgroup":
            for option in extra[2].split(","):
                if option in CONTROLLERS:
                    found.setdefault(option, (point, fields[3]))
    return found


def _make_base(base: Path) -> bool:
    _remove_stale(base.parent)
    try:
        base.mkdir(exist_ok=True)
    except OSError:
        return False
    return os.access(base, os.W_OK)


def _remove_stale(parent: Path) -> None:
    """Remove the empty groups of execbox processes that died without
    cleaning up (killed, say)."""
    try:
        bases = [p for p in parent.iterdir() if p.name.startswith("execbox-") and p.is_dir()]
    except OSError:
        return
    for base in bases:
        pid = base.name.removeprefix("execbox-")
        if not pid.isdigit() or os.path.exists(f"/proc/{pid}"):
            continue
        for child in base.iterdir():
            if child.is_dir():
                rmdir(child)
        rmdir(base)
