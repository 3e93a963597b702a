"""``execbox doctor`` tells the truth about this host, for this user: run
for real as root, as the non-root test user, and where bubblewrap cannot
start (no user namespace can be made)."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest

from execbox.backends.sandbox import find_bwrap
from execbox.jail._cgroups import cgroup_support
from tests.conftest import bubblewrap_problem, require
from tests.hostile_hosts import without_user_namespaces

SRC = str(Path(__file__).resolve().parents[2] / "src")
TESTER = "execbox-tester"


def _tester() -> tuple[pwd.struct_passwd, str]:
    if os.geteuid() != 0:
        pytest.skip("needs root: runs doctor as another user")
    try:
        tester = pwd.getpwnam(TESTER)
    except KeyError:
        tester = None
    python = f"{tester.pw_dir}/venv/bin/python" if tester else ""
    require(
        "the non-root test user",
        tester is not None and os.path.exists(python),
        f"./dev.sh test creates {TESTER} and its virtual environment (as root)",
    )
    return tester, python  # type: ignore[return-value]


def _env(home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "LANG": "C.UTF-8",
        "PYTHONPATH": SRC,
        "PYTHONDONTWRITEBYTECODE": "1",
    }


def _doctor(done: subprocess.CompletedProcess[str]) -> dict:
    start = done.stdout.find("{")
    assert start >= 0, done.stdout + done.stderr
    return json.loads(done.stdout[start:])


def test_doctor_as_this_user_names_the_tier_and_how_each_limit_holds():
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    done = subprocess.run(
        [sys.executable, "-m", "execbox.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_env(os.environ.get("HOME", "/")),
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = _doctor(done)
    assert found["tier"] == "namespaces"
    for limit in ("timeout_s", "memory_mb", "max_processes", "network"):
        assert limit in found["limits"], found
    support = cgroup_support()[0]  # what this process finds, doctor must say (v1 host, v2 VM, delegated)
    if support is not None:
        assert f"cgroup v{support.version}" in found["limits"]["max_processes"], found
        assert "cpus" in found["limits"], found
    else:
        assert "RLIMIT_AS" in found["limits"]["memory_mb"] and "cpus" in found["gaps"], found
    assert "RLIMIT_NPROC in the block's own user namespace" in found["limits"]["max_processes"], found
    languages = found["languages"]  # what the jail finds of the language table, and what to install
    assert "python" in languages["available"] and "sh" in languages["available"], languages
    for name, fix in languages["missing"].items():
        assert name not in languages["available"] and "not found" in fix and "install" in fix, languages
    pool = found["pool"]  # the warm pool's health after doctor's own blocks
    assert pool["boxes_made"] >= pool["size"] == 4 and pool["boxes_replaced"] == 0, pool
    assert pool["boxes"] <= 8, pool  # four threads: one box each, and at most one more asked by each
    assert (pool["stalls"], pool["zygote_restarts"], pool["refills_failed"]) == (0, 0, 0), pool


def test_doctor_as_a_user_without_cgroups_names_rlimits_and_the_cpu_gap():
    tester, python = _tester()
    runuser = "/usr/sbin/runuser" if os.path.exists("/usr/sbin/runuser") else "runuser"
    done = subprocess.run(
        [runuser, "-u", TESTER, "--", python, "-m", "execbox.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        env=_env(tester.pw_dir),
        cwd="/",
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = _doctor(done)
    # where bubblewrap cannot make a jail (a container with the engine's defaults), the user's is
    # the Landlock tier, and doctor says why the namespaces tier does not start
    cannot = bubblewrap_problem()
    assert found["root"] is False and found["tier"] == ("landlock" if cannot else "namespaces"), found
    starts = next(f for f in found["findings"] if f["name"] == "the namespaces tier starts")
    assert starts["ok"] is (cannot is None) and starts["seen"], (cannot, starts)
    cgroup = next(f for f in found["findings"] if f["name"] == "a cgroup per block")
    if not cgroup["ok"]:  # this host (cgroup v1) gives a user no cgroup
        assert "RLIMIT_AS" in found["limits"]["memory_mb"], found
        assert "RLIMIT_NPROC" in found["limits"]["max_processes"], found
        assert "cpus" in found["gaps"] and cgroup["fix"], found


def test_doctor_where_no_user_namespace_can_be_made_names_the_sysctl_and_the_landlock_tier():
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    tester, python = _tester()
    done = without_user_namespaces(
        [python, "-m", "execbox.cli", "doctor", "--json"],
        uid=tester.pw_uid,
        gid=tester.pw_gid,
        env=_env(tester.pw_dir),
        cwd="/",
    )
    found = _doctor(done)
    assert found["tier"] == "landlock", found  # the tier that needs no namespace
    assert (
        "RLIMIT_NPROC" in found["limits"]["max_processes"] and "unix datagram" in found["limits"]["network"]
    ), found
    assert any("/proc" in seen for seen in found["exposed"]), found  # says what the tier does not hide
    refused = {f["name"]: f for f in found["findings"] if not f["ok"]}
    assert "the namespaces tier starts" in refused, found
    assert "user.max_user_namespaces allows user namespaces" in refused, found
    assert "sysctl user.max_user_namespaces" in refused["the namespaces tier starts"]["fix"], found


def test_doctor_reports_the_gpus_the_driver_and_which_tiers_give_them():
    from execbox._gpus import host_gpus
    from execbox.backends.sandbox._doctor import diagnose
    from tests._fake_gpus import UUID0, fake_gpu_host

    with fake_gpu_host():
        gpus = diagnose(try_blocks=False).gpus
    assert gpus["found"][0].startswith(f"GPU 0: NVIDIA H200, {UUID0}") and len(gpus["found"]) == 2
    assert gpus["driver"] == "580.95.05"
    assert gpus["nodes"][:3] == ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl"]
    assert gpus["tiers"]["namespaces"].startswith("no: the namespaces tier does not start")  # not tried
    assert gpus["tiers"]["docker"].startswith("with the NVIDIA Container Toolkit")
    if not host_gpus():  # the host's own, read again once the fake is gone
        none = diagnose(try_blocks=False).gpus
        assert none["found"] == [] and "install the NVIDIA driver" in none["fix"]
