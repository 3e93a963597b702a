"""Per-block control groups: memory, process and CPU limits, a way to kill
everything a block started, and whether the kernel's OOM killer struck.

cgroup v1 (a hierarchy per controller, as on this project's CI machines) and
v2 (one unified hierarchy, most current hosts) are detected once. Each block
gets a group of its own under ``<our cgroup>/execbox-<pid>/``; a process joins
it by writing ``0`` into the group's ``cgroup.procs`` (so a process inside a
namespace can join through a descriptor the host opened for it).

On v2 a user who is not root gets groups in a delegated subtree (systemd's
``Delegate=yes``, or a group chowned to the user): the groups go beside
ours when our parent is ours to write, else inside our own group, after its
processes (this one among them) move to a leaf, ``execbox-leaf``: v2 lets
no group with processes give its children controllers.
"""

from __future__ import annotations

import atexit
import errno
import itertools
import os
import queue
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = ["BlockCgroup", "BlockGroup", "CgroupSupport", "cgroup_support"]

CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000
# cgroup v2, a delegated group: where its processes go so that it may have children
LEAF = "execbox-leaf"
_names = itertools.count(1)


class BlockGroup(Protocol):
    """What a block's runner asks of the cgroup a block ran in: its own
    (``BlockCgroup``) or its share of a pool box's (``_box.BlockShare``)."""

    def kill(self) -> None: ...
    def oom_killed(self) -> bool: ...
    def peak_memory_mb(self) -> float | None: ...
    def pids(self) -> list[int]: ...
    def pids_current(self) -> int: ...
    def remove(self) -> None: ...


@dataclass(frozen=True)
class CgroupSupport:
    """Where this process can create per-block groups (``None`` from
    ``cgroup_support()`` means nowhere; ``reason`` then says why)."""

    version: int
    bases: dict[str, Path]  # controller -> directory under which groups are made (v2: one dir)

    def create(self, *, memory_mb: int | None, max_processes: int | None, cpus: float | None) -> BlockCgroup:
        name = f"b{next(_names)}-{os.urandom(3).hex()}"
        # v1: a group in the hierarchies of the limits set only (memory always: the OOM report);
        # each group costs ~0.1 ms of the host's CPU to make, fill, empty and remove
        wanted = {"memory": True, "pids": bool(max_processes), "cpu": bool(cpus)}
        bases = {c: b for c, b in self.bases.items() if self.version == 2 or wanted[c]}
        dirs = sorted({base / name for base in bases.values()})
        made: list[Path] = []
        try:
            for path in dirs:
                path.mkdir()
                made.append(path)
            group = BlockCgroup(self.version, {c: b / name for c, b in bases.items()}, made)
            group.set_limits(memory_mb, max_processes, cpus)
            return group
        except BaseException:
            for path in reversed(made):
                _rmdir(path)
            raise


class BlockCgroup:
    """One block's group (a directory per hierarchy on v1)."""

    def __init__(self, version: int, by_controller: dict[str, Path], dirs: list[Path]) -> None:
        self.version = version
        self.by_controller = by_controller
        self.dirs = dirs

    def set_limits(self, memory_mb: int | None, max_processes: int | None, cpus: float | None) -> None:
        mem = self.by_controller["memory"]
        if memory_mb:
            limit = str(memory_mb * 1024 * 1024)
            if self.version == 1:
                _write(mem / "memory.limit_in_bytes", limit)
                _write_try(mem / "memory.memsw.limit_in_bytes", limit)  # no escape into swap
            else:
                _write(mem / "memory.max", limit)
                _write_try(mem / "memory.swap.max", "0")
        if max_processes:
            _write(self.by_controller["pids"] / "pids.max", str(max_processes))
        if cpus:
            quota = max(1000, int(cpus * CPU_PERIOD_US))
            cpu = self.by_controller["cpu"]
            if self.version == 1:
                _write(cpu / "cpu.cfs_period_us", str(CPU_PERIOD_US))
                _write(cpu / "cpu.cfs_quota_us", str(quota))
            else:
                _write(cpu / "cpu.max", f"{quota} {CPU_PERIOD_US}")

    def open_procs(self) -> list[int]:
        """Write-only descriptors of each ``cgroup.procs``: writing ``0`` to
        all of them moves the writer into this group."""
        fds: list[int] = []
        try:
            for path in self.dirs:
                fds.append(os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        return fds

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.dirs:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                pass
        return sorted(found)

    def pids_current(self) -> int:
        """Tasks (threads included) in the group: what a pids limit counts."""
        try:
            return int((self.by_controller["pids"] / "pids.current").read_text())
        except (OSError, ValueError, KeyError):
            return 0

    def kill(self) -> None:
        """SIGKILL every process in the group (repeated: a forking process
        may add more between two reads; the pids limit bounds that)."""
        if self.version == 2:
            try:
                _write(self.dirs[0] / "cgroup.kill", "1")
                return
            except OSError:
                pass
        for _ in range(50):
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            time.sleep(0.001)

    def oom_killed(self) -> bool:
        """Whether the kernel killed a process of this group for memory."""
        return self.oom_kills() > 0

    def oom_kills(self) -> int:
        """How many processes of this group the kernel killed for memory."""
        mem = self.by_controller.get("memory")
        if mem is None:
            return 0
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            for line in (mem / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0

    def peak_memory_mb(self) -> float | None:
        """The most memory the group's processes held at once (None where
        the kernel does not say: cgroup v2 before Linux 5.19)."""
        mem = self.by_controller.get("memory")
        if mem is None:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return round(int((mem / name).read_text()) / (1 << 20), 1)
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Kill what is left and remove the group, in the background (the
        last processes of a block may take a few ms to be gone)."""
        _janitor.put(self)


class _Janitor:
    """Removes groups whose processes are still exiting."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[BlockCgroup] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def put(self, group: BlockCgroup) -> None:
        self._queue.put(group)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._work, name="execbox-cgroups", daemon=True)
                self._thread.start()

    def _work(self) -> None:
        while True:
            group = self._queue.get()
            # Mostly the block's PID namespace has already taken its processes down and the
            # groups are empty: removed at once, no scan of cgroup.procs; else killed, then removed.
            left = [path for path in group.dirs if not _rmdir(path)]
            if left:
                group.kill()
            for path in left:
                if not _rmdir(path, wait_s=5.0):
                    _leftovers.add(path)


_janitor = _Janitor()
_leftovers: set[Path] = set()
_lock = threading.Lock()
_cached: CgroupSupport | None = None
_reason = ""
_detected = False


def cgroup_support() -> tuple[CgroupSupport | None, str]:
    """(support, reason it is missing). Detected once per process."""
    global _cached, _reason, _detected
    with _lock:
        if not _detected:
            try:
                _cached, _reason = _detect()
            except OSError as exc:
                _cached, _reason = None, f"cgroups could not be read: {exc}"
            _detected = True
            if _cached is not None:
                atexit.register(_cleanup, _cached)
        return _cached, _reason


def _detect() -> tuple[CgroupSupport | None, str]:
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
    return CgroupSupport(1, bases), ""


def _detect_v2(own: str, mount: tuple[Path, str]) -> tuple[CgroupSupport | None, str]:
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
                _write(parent / "cgroup.subtree_control", f"+{controller}")
        base = parent / f"execbox-{os.getpid()}"
        if not _make_base(base):
            return None, f"cgroup v2: cannot create {base}"
        _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in CONTROLLERS))
    except OSError as exc:
        return None, f"cgroup v2: cannot enable {', '.join(CONTROLLERS)} under {parent}: {exc}"
    return CgroupSupport(2, {c: base for c in CONTROLLERS}), ""


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
                    _write(leaf / "cgroup.procs", pid)
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
                _rmdir(child)
        _rmdir(base)


def _write(path: Path, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _write_try(path: Path, value: str) -> None:
    try:
        _write(path, value)
    except OSError:
        pass


def _rmdir(path: Path, wait_s: float = 0.0) -> bool:
    deadline = time.monotonic() + wait_s
    while True:
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno != errno.EBUSY or time.monotonic() >= deadline:
                return False
            time.sleep(0.005)


def _cleanup(support: CgroupSupport) -> None:
    while True:  # what the janitor has not got to yet
        try:
            group = _janitor._queue.get_nowait()
        except queue.Empty:
            break
        group.kill()
        for path in group.dirs:
            if not _rmdir(path, wait_s=0.5):
                _leftovers.add(path)
    for path in list(_leftovers):
        _rmdir(path, wait_s=0.2)
    for base in set(support.bases.values()):
        _rmdir(base, wait_s=0.2)
