"""The sandbox's limits in a real cgroup-v2 kernel, as each kind of user
found there: root; a user who is not root, in a group that root owns (no
delegation); that user in a group delegated to it (systemd's Delegate=yes).

CI is root on cgroup v1; most users are on v2. ``scripts/vm/run.sh`` boots
Debian's 6.1 kernel under qemu (TCG: a KVM guest hangs at boot on CI's
machines) on this machine's own root filesystem, shared read-only under a
tmpfs overlay, with cgroup2 at /sys/fs/cgroup, and runs one command in it.
Each kind of user gets a guest of its own, which runs a pytest subset there:
the host promises (``tests/hosts``) and the sandbox's limits, and for root a
part of the hostile battery. A copy of the checkout goes in through a shared
folder (the test user may not be able to read this one), the inner junit
report comes out through it.

Measured on CI's 2-core machine: boot to the first line of the job 12-14 s,
Python with execbox and pytest imported 5-8 s more, the inner tests 5-7x
slower than on the host; each guest, boot to power-off: root 180-280 s,
delegated 95-120 s, user 70-150 s (the higher ones with the machine busy);
the module 6-8 min one guest at a time (root 330 s, user 100 s, delegated
about 170 s on a quiet machine, with one core idle throughout); in two lanes,
7.8 min once (root 427 s beside user 136 s + delegated 219 s).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import threading
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_ALL, require

CHECKOUT = Path(__file__).resolve().parents[1]
RUN = CHECKOUT / "scripts" / "vm" / "run.sh"
CACHE = Path(os.environ.get("EXECBOX_VM_CACHE", CHECKOUT / ".cache" / "vm"))
TESTER = "execbox-tester"
TIME_LIMIT_S = 780  # one guest, another beside it: its boot and its tests (run.sh kills qemu then)

SUBSET = ["tests/hosts", "tests/backends/test_sandbox_limits.py", "tests/cli/test_doctor.py"]
# For root: the battery's attacks on the limits cgroups hold, and its
# ordinary-use check (each in the pool and one-shot).
BATTERY = [
    "tests/security/test_executor.py",
    "tests/security/test_resources.py::test_memory_bomb_fails_and_says_why",
    "tests/security/test_resources.py::test_fork_bomb_ends_and_leaves_nothing",
    "tests/security/test_resources.py::test_max_processes_is_enforced",
]
# No Docker engine in the guest; of the battery, the sandbox's modes only.
SELECT = "not docker and (not security or pool or oneshot)"
# Cgroups cannot exist for a user without delegation: the tests of the
# cgroup limits themselves are left out there (tests/hosts checks what holds
# without them).
CGROUP_TESTS = (
    "test_memory_exhaustion_is_reported_as_the_limit or test_process_limit_contains_a_fork_bomb "
    "or test_cpu_quota_throttles"
)
KINDS = {  # root first: the longest
    # kind: (what runs, -k, how many must pass at least: proof that it ran)
    "root": (SUBSET + BATTERY, SELECT, 30),
    "user": (SUBSET, f"{SELECT} and not ({CGROUP_TESTS})", 15),
    "delegated": (SUBSET, SELECT, 15),
}
GUEST_TIME_SCALE = 3  # the battery's 2 s timeout: 6 s in a guest (tests/conftest.py TIME_SCALE)
LANES = [["root"], ["user", "delegated"]]  # root's guest takes about as long as the two others


def _tester() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(TESTER)
    except KeyError:
        return None


def _python(kind: str) -> Path:
    """The interpreter of the job: the project's venv for root (its
    interpreter may live under /root), the test user's own venv else."""
    if kind == "root":
        return CHECKOUT / ".venv" / "bin" / "python"
    tester = _tester()
    return Path(tester.pw_dir if tester else "/nonexistent") / "venv" / "bin" / "python"


def _require_vm() -> None:
    if os.geteuid() != 0:
        pytest.skip("the VM needs root: qemu shares this machine's root filesystem as its owners see it")
    require(
        "qemu",
        shutil.which("qemu-system-x86_64") is not None,
        "apt-get install qemu-system-x86 (./dev.sh test does)",
    )
    require(
        "the VM's kernel",
        (CACHE / "vmlinuz").exists() and (CACHE / "initramfs.cpio.gz").exists(),
        "scripts/vm/build.sh fetches it into .cache/vm (./dev.sh test does)",
    )


def _missing(kind: str) -> str | None:
    """Why the guest of ``kind`` cannot run here (None: it can)."""
    if kind != "root" and (_tester() is None or not _python(kind).exists()):
        return (
            f"the non-root test user is not available: ./dev.sh test creates {TESTER} and its venv (as root)"
        )
    return None


def _copy_checkout(share: Path) -> Path:
    """src, tests and pyproject.toml, readable by all (compiled files kept:
    compiling in the guest is slow)."""
    copy = share / "checkout"
    ignore = shutil.ignore_patterns(".pytest_cache")
    for part in ("src", "tests"):
        shutil.copytree(CHECKOUT / part, copy / part, ignore=ignore)
    shutil.copy2(CHECKOUT / "pyproject.toml", copy / "pyproject.toml")
    for path in [copy, *copy.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return copy


def _counts(junit: Path) -> dict[str, int]:
    suite = ET.parse(junit).getroot()
    if suite.tag == "testsuites":
        suite = suite[0]
    counts = {key: int(suite.get(key, 0)) for key in ("tests", "failures", "errors", "skipped")}
    counts["passed"] = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return counts


@pytest.mark.timeout(len(KINDS) * (TIME_LIMIT_S + 60))
def test_the_limits_hold_in_cgroup2_guests(tmp_path):
    """Each kind of user's guest, in two lanes side by side: root's, and the
    user's then the delegated user's. A guest's job is one pytest process,
    so a guest keeps about one core busy (measured: the machine half idle
    while the guests ran one at a time); two at once fill a 2-core machine.
    Not beside pytest-xdist's workers (marked alone): there, three guests at
    once each ran past their time limit. Every kind runs even when one
    fails; the failure names each."""
    _require_vm()
    problems: list[str] = []
    skipped: list[str] = []
    finished: list[str] = []

    def lane(kinds: list[str]) -> None:
        for kind in kinds:
            why = _missing(kind)
            if why is not None:
                if REQUIRE_ALL:
                    problems.append(f"as {kind}: EXECBOX_REQUIRE=all but {why}")
                skipped.append(f"{kind} ({why})")
                continue
            try:
                _guest(tmp_path / kind, kind)
            except AssertionError as exc:
                problems.append(str(exc))
            except Exception as exc:  # noqa: BLE001 - lost in the thread unless kept (a timeout, say)
                problems.append(f"as {kind}: {exc!r}")
            finished.append(kind)

    lanes = [threading.Thread(target=lane, args=(kinds,)) for kinds in LANES]
    for thread in lanes:
        thread.start()
    for thread in lanes:
        thread.join()
    assert sorted(finished + [s.split(" ")[0] for s in skipped]) == sorted(KINDS), (finished, skipped)
    assert not problems, "\n\n".join(problems)
    if skipped:
        pytest.skip(f"the guests ran but for: {', '.join(skipped)}")


def _guest(folder: Path, kind: str) -> None:
    """Boot a guest as ``kind``, run its subset there, and check its report."""
    paths, select, at_least = KINDS[kind]
    folder.mkdir()
    share = folder / "share"
    share.mkdir(mode=0o755)
    copy = _copy_checkout(share)
    out = share / "out"
    out.mkdir()
    out.chmod(0o777)  # the job's user writes its report there
    junit = out / "junit.xml"
    # Of the plugins installed, the subset needs pytest-timeout only (loading
    # the project venv's others took 4-7 s in the guest).
    inner = [
        "env",
        f"PYTHONPATH={copy / 'src'}",
        "PYTHONDONTWRITEBYTECODE=1",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1",
        f"EXECBOX_REQUIRE={'all' if REQUIRE_ALL else ''}",
        f"EXECBOX_TEST_TIME_SCALE={GUEST_TIME_SCALE}",
        str(_python(kind)),
        "-m",
        "pytest",
        *paths,
        "-k",
        select,
        "-q",
        "-rfEs",
        "--tb=short",
        "--durations=5",
        "-p",
        "pytest_timeout",
        "-p",
        "no:cacheprovider",
        "--basetemp=/tmp/inner",
        f"--junitxml={junit}",
    ]
    report = 'echo "cgroup filesystem: $(stat -fc %T /sys/fs/cgroup), own group: $(cat /proc/self/cgroup)"'
    argv = [
        str(RUN),
        "--as",
        kind,
        "--cwd",
        str(copy),
        "--share",
        str(share),
        "--timeout",
        str(TIME_LIMIT_S),
        "--",
        "sh",
        "-c",
        f'{report}; exec "$@"',
        "sh",
        *inner,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIME_LIMIT_S + 30)
    output = done.stdout + done.stderr
    tail = "\n".join(output.splitlines()[-80:])
    print(tail)
    assert "cgroup filesystem: cgroup2fs" in output, f"as {kind}, the guest was not on cgroup v2:\n{tail}"
    assert done.returncode == 0, (
        f"as {kind}, the tests in the guest failed (exit status {done.returncode}):\n{tail}"
    )
    counts = _counts(junit)
    assert counts["passed"] >= at_least, f"as {kind}, only {counts} in the guest:\n{tail}"
