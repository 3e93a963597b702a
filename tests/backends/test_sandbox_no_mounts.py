"""As root without CAP_SYS_ADMIN (a container's root with the engine's
defaults), with the interpreter under a closed folder (a checkout cloned
into /root): no mount namespace can show the jail id its paths, so the
closed folders give the jails' reach group search by an ACL entry
(``_acl``).

Seen before (issue 40): ``SubprocessError: Exception occurred in
preexec_fn`` from the staging namespace, which the auto path never caught,
and the Landlock tier refused with "chmod o+x".

The condition is made for real here: the executor runs under ``setpriv``
with CAP_SYS_ADMIN dropped from its bounding set, with a virtual
environment of Debian's Python in a 0700 folder.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import struct
import subprocess
import sysconfig
import tempfile
from pathlib import Path

import pytest

from execbox.backends.sandbox._landlock_tier import landlock_problem
from execbox.jail import _acl
from execbox.jail._identity import lease, reach_group
from execbox.jail._jail import find_bwrap
from tests.conftest import require

CHECKOUT = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
SYSTEM_PYTHON = "/usr/bin/python3"

SCRIPT = """
import os, sys, warnings
from execbox import CodeBlock, Limits, SandboxExecutor
tier, workspace, closed = sys.argv[1:4]
warnings.simplefilter("ignore")
block = f'''
import os
print(6 * 7)
for what, path in (("list", {closed!r}), ("read", {closed!r} + "/secret.txt")):
    try:
        print(what, sorted(os.listdir(path)) if what == "list" else open(path).read())
    except OSError as exc:
        print(what, "refused", exc.errno)
print("groups", os.getgroups())
'''
with SandboxExecutor(workspace=workspace, isolation=tier, limits=Limits(timeout_s=30)) as ex:
    print("TIER", ex.isolation_in_use)
    print(ex.run(CodeBlock("python", block)).output, end="")
"""


def _acl_entries(path: Path) -> list[tuple[int, int, int]]:
    data = os.getxattr(path, _acl.XATTR)
    return [struct.unpack_from("<HHI", data, offset) for offset in range(4, len(data), 8)]


@pytest.fixture
def closed_home(tmp_path):
    """A 0700 root-owned folder holding a virtual environment of Debian's
    Python (as a checkout's .venv under /root) and a readable secret."""
    if not ROOT:
        pytest.skip("needs root: the jail id and CAP_SYS_ADMIN are root's")
    require("Debian's Python", os.path.exists(SYSTEM_PYTHON), f"no {SYSTEM_PYTHON}")
    require("setpriv", shutil.which("setpriv") is not None, "apt-get install util-linux")
    # in a folder open to all, not under tmp_path: the ACL entry stays (by design) on every closed
    # folder above what the jail needs, and pytest's own (/tmp/pytest-of-root, 0700) must not get one
    base = Path(tempfile.mkdtemp(prefix="execbox-closed-home-"))
    os.chmod(base, 0o755)
    home = base / "home"
    home.mkdir(mode=0o700)
    os.chmod(home, 0o700)
    try:
        subprocess.run(
            [SYSTEM_PYTHON, "-m", "venv", "--without-pip", str(home / "venv")], check=True, timeout=120
        )
        (home / "secret.txt").write_text("root's")
        os.chmod(home / "secret.txt", 0o644)
        yield home
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _run_without_sys_admin(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    deps = sysconfig.get_paths()["purelib"]  # rich, for execbox itself (not for the blocks)
    return subprocess.run(
        [
            "setpriv",
            "--inh-caps=-sys_admin",
            "--bounding-set=-sys_admin",
            str(home / "venv" / "bin" / "python"),
            *argv,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=CHECKOUT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{CHECKOUT / 'src'}:{deps}", "LANG": "C.UTF-8"},
    )


@pytest.mark.parametrize("tier", ["namespaces", "landlock"])
def test_root_without_mount_namespaces_runs_an_interpreter_under_a_closed_folder(closed_home, tmp_path, tier):
    if tier == "namespaces":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    else:
        problem = landlock_problem()
        require("Landlock", problem is None, problem or "")
    workspace = str(closed_home.parent / "ws")
    done = _run_without_sys_admin(closed_home, "-c", SCRIPT, tier, workspace, str(closed_home))
    if tier == "namespaces" and "bubblewrap could not create a sandbox" in done.stderr:
        pytest.skip(f"bubblewrap cannot start here: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == [f"TIER {tier}", "42"], done.stdout
    if tier == "landlock":  # the block lists nothing of the closed folder and reads none of it
        assert lines[2:5] == ["list refused 13", "read refused 13", f"groups [{reach_group()}]"], done.stdout
    else:  # the jail shows the venv's folder alone at its place; the group is unmapped in the jail
        assert lines[2:5] == ["list ['venv']", "read refused 2", "groups [65534]"], done.stdout
    # one ACL entry on the closed folder: search, for the reach group; the owning group gets nothing
    entries = _acl_entries(closed_home)
    assert (_acl.GROUP, _acl.SEARCH, reach_group()) in entries, entries
    assert (_acl.GROUP_OBJ, 0, _acl.UNDEFINED) in entries and (_acl.OTHER, 0, _acl.UNDEFINED) in entries
    assert stat.S_IMODE(closed_home.stat().st_mode) == 0o710, oct(closed_home.stat().st_mode)
    # nothing outside what the jail needs: pytest's own closed folders kept bare
    touched = [p for p in _pytests_folders(tmp_path) if _acl.XATTR in os.listxattr(p)]
    assert touched == [], touched


def _pytests_folders(tmp_path: Path) -> list[Path]:
    """The test's own folder and pytest's above it, that no jail needs here.
    Where this run's root can make no mount namespace either (a container
    started with the engine's defaults), the jails of every other test
    whose workspace is under tmp_path open pytest's closed folders by the
    same entry, rightly: there only the test's own folder is judged."""
    return [tmp_path, *tmp_path.parents] if _acl.mount_namespaces() else [tmp_path]


def test_doctor_runs_there_and_finds_a_tier(closed_home):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    done = _run_without_sys_admin(
        closed_home, "-c", "from execbox.cli import main; main()", "doctor", "--json"
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    starts = {f["name"]: f for f in report["findings"]}["the namespaces tier starts"]
    assert report["tier"] in ("namespaces", "landlock") and report["tier"] != "none", report
    if report["tier"] == "landlock":  # bubblewrap cannot start here for a reason of its own: said
        assert not starts["ok"] and starts["seen"], starts
    else:
        assert starts["ok"] and starts["seen"] == "a block ran", starts


def test_a_closed_folder_another_user_owns_is_left_as_it_is(tmp_path):
    if not ROOT:
        pytest.skip("needs root: the folder is made another user's")
    mine = tmp_path / "mine"  # root's, closed: the grant would open it were theirs not refused
    theirs = mine / "theirs"
    (theirs / "venv").mkdir(parents=True)
    os.chmod(mine, 0o700)
    os.chown(theirs, 12345, 12345)
    os.chmod(theirs, 0o700)
    why = _acl.grant_search([str(theirs / "venv")], 0x70000001, 0x70000001, reach_group())
    assert why == f"{theirs} is closed to the jail id and owned by uid 12345, not root", why
    with pytest.raises(OSError):
        os.getxattr(theirs, _acl.XATTR)
    assert stat.S_IMODE(theirs.stat().st_mode) == 0o700
    # checked before any change: the closed folders above it (root's own, pytest's) are left bare too
    touched = [p for p in (mine, *_pytests_folders(tmp_path)) if _acl.XATTR in os.listxattr(p)]
    assert touched == [], touched
    assert stat.S_IMODE(mine.stat().st_mode) == 0o700


def test_a_mask_that_withholds_search_from_others_is_not_widened():
    entries = [
        (_acl.USER_OBJ, 7, _acl.UNDEFINED),
        (_acl.GROUP_OBJ, 5, _acl.UNDEFINED),  # r-x, masked to r--
        (_acl.MASK, 4, _acl.UNDEFINED),
        (_acl.OTHER, 0, _acl.UNDEFINED),
    ]
    with pytest.raises(ValueError, match="withholds search"):
        _acl._with_search(entries, 99)
    # the mask already grants search: the entry is added, the mask unchanged
    entries[2] = (_acl.MASK, 5, _acl.UNDEFINED)
    data = _acl._with_search(entries, 99)
    rows = [struct.unpack_from("<HHI", data, offset) for offset in range(4, len(data), 8)]
    assert rows == sorted(rows, key=lambda r: (r[0], r[2])) and (_acl.GROUP, 1, 99) in rows
    assert (_acl.MASK, 5, _acl.UNDEFINED) in rows


def test_the_reach_group_is_never_leased(monkeypatch, tmp_path):
    if not ROOT:
        pytest.skip("needs root: leases are root's")
    first = 0x60000000 + (os.getpid() % 1000) * 64  # outside the default range: no test beside it
    monkeypatch.setenv("EXECBOX_JAIL_IDS", f"{first}:2")
    held = lease()
    assert held is not None and held.uid == first, held
    try:
        with pytest.raises(Exception, match="all 1 jail ids"):
            lease()
    finally:
        held.release()
    assert reach_group() == first + 1
