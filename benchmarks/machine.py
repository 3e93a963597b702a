"""What the benchmarks ran on, for the JSON result: figures mean little
without the machine (CPU, memory, kernel, cgroup version, whether inside a
container, the Docker engine and its runtimes) and the commit measured.
Every probe is best effort: a missing file or tool gives ``None``, never an
exception."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from pathlib import Path

__all__ = ["describe"]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def _run(argv: list[str], cwd: Path | None = None, timeout: float = 10) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        done = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _cpu() -> dict:
    models = [
        line.split(":", 1)[1].strip()
        for line in _read("/proc/cpuinfo").splitlines()
        if line.startswith("model name")
    ]
    quota = _read("/sys/fs/cgroup/cpu.max").split() or [
        _read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").strip(),
        _read("/sys/fs/cgroup/cpu/cpu.cfs_period_us").strip(),
    ]
    limit = None
    if len(quota) == 2 and quota[0] not in ("", "max", "-1") and quota[1]:
        limit = int(quota[0]) / int(quota[1])
    return {
        "model": models[0] if models else platform.processor() or None,
        "count": os.cpu_count(),
        "usable": len(os.sched_getaffinity(0)),
        "cgroup_cpu_limit": limit,
    }


def _memory_gib() -> float | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _distribution() -> str | None:
    for line in _read("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip().strip('"')
    return None


def _cgroup() -> str:
    """v2 (unified), hybrid (v1 controllers plus a v2 tree) or v1, from the mounts."""
    types = {
        fields[2]
        for fields in (line.split() for line in _read("/proc/mounts").splitlines())
        if len(fields) > 2 and fields[1].startswith("/sys/fs/cgroup")
    }
    if "cgroup" in types:
        return "hybrid (v1 controllers, v2 tree)" if "cgroup2" in types else "v1"
    return "v2" if "cgroup2" in types else "none mounted"


def _container() -> str | None:
    """The container technology this runs in, or None on a bare machine or VM."""
    found = _run(["systemd-detect-virt", "--container"])
    if found and found != "none":
        return found
    if Path("/.dockerenv").exists():
        return "docker"
    if Path("/run/.containerenv").exists():
        return "podman"
    return None


def _vm() -> str | None:
    found = _run(["systemd-detect-virt", "--vm"])
    return found if found and found != "none" else None


def _docker() -> dict | None:
    out = _run(["docker", "info", "--format", "{{json .}}"], timeout=15)
    if not out:
        return None
    try:
        info = json.loads(out)
    except ValueError:
        return None
    return {
        "server_version": info.get("ServerVersion"),
        "runtimes": sorted(info.get("Runtimes") or {}),
        "default_runtime": info.get("DefaultRuntime"),
        "cgroup_version": info.get("CgroupVersion"),
        "storage_driver": info.get("Driver"),
    }


def _commit(root: Path) -> dict:
    status = _run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root)
    return {
        "commit": _run(["git", "rev-parse", "HEAD"], cwd=root),
        "dirty": None if status is None else bool(status),
    }


def describe(root: Path, bench_python: Path | None = None) -> dict:
    """The machine and the commit, as one JSON-ready dict. ``bench_python``:
    the benchmark venv's interpreter, whose version the subjects ran on."""
    bench_version = None
    if bench_python is not None:
        bench_version = _run([str(bench_python), "-c", "import platform; print(platform.python_version())"])
    return {
        "cpu": _cpu(),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "distribution": _distribution(),
        "cgroup": _cgroup(),
        "container": _container(),
        "vm": _vm(),
        "python": platform.python_version(),
        "bench_venv_python": bench_version,
        "docker": _docker(),
        "git": _commit(root),
    }
