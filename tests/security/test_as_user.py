"""The battery's ``as_user`` attempts again, as a non-root user.

Most users do not run execbox as root: there the jail is the user itself,
with no cgroups on a v1 host. When this suite runs as root, the attempts
marked ``as_user`` run once more as the user ``./dev.sh test`` made
(``execbox-tester``, in the docker group, with a virtual environment of
Debian's python3 that it can run), on a copy of this checkout it can read.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_ALL, require

TESTER = "execbox-tester"
CHECKOUT = Path(__file__).resolve().parents[2]
TIME_LIMIT_S = 1500
# The modes whose host side changes with the user who runs execbox (the jail's identity, cgroups,
# the workspace's owner, the docker group). Left out: remote (the pool behind HTTP: the server's
# user is the pool mode's, attacked here) and docker-gvisor (the container sees the same under
# either user: runc, kept, covers the host side of a user in the docker group).
AS_USER_MODES = "not remote and not gvisor"


def _tester() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(TESTER)
    except KeyError:
        return None


@pytest.mark.timeout(TIME_LIMIT_S + 60)  # the whole battery's as_user attempts, every mode: past the default
def test_the_as_user_attempts_pass_as_a_non_root_user(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("this run is not root's: the as_user attempts ran as this user already")
    tester = _tester()
    python = Path(tester.pw_dir if tester else "/nonexistent") / "venv" / "bin" / "python"
    require(
        "the non-root test user",
        tester is not None and python.exists(),
        f"./dev.sh test creates {TESTER} and its virtual environment (as root)",
    )
    assert tester is not None
    copy = Path(tempfile.mkdtemp(prefix="execbox-as-user-"))
    try:
        os.chmod(copy, 0o755)
        ignore = shutil.ignore_patterns("__pycache__", ".pytest_cache")
        for part in ("src", "tests"):
            shutil.copytree(CHECKOUT / part, copy / part, ignore=ignore)
        shutil.copy(CHECKOUT / "pyproject.toml", copy / "pyproject.toml")
        base = copy / "tmp"
        base.mkdir()
        os.chown(base, tester.pw_uid, tester.pw_gid)
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": tester.pw_dir,
            "LANG": "C.UTF-8",
            "PYTHONPATH": str(copy / "src"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "EXECBOX_REQUIRE": "all" if REQUIRE_ALL else "",
        }
        runuser = shutil.which("runuser", path="/usr/sbin:/sbin:/usr/bin:/bin") or "runuser"
        argv = [
            runuser,
            "-u",
            TESTER,
            "--",
            str(python),
            "-m",
            "pytest",
            "tests/security",
            "tests/hosts",
            "-m",
            "as_user",
            "-k",
            AS_USER_MODES,
            "-q",
            "-rf",
            "--tb=short",
            "-p",
            "no:cacheprovider",
            f"--basetemp={base / 'run'}",
        ]
        done = subprocess.run(argv, cwd=copy, env=env, capture_output=True, text=True, timeout=TIME_LIMIT_S)
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    tail = "\n".join((done.stdout + done.stderr).splitlines()[-60:])
    print(tail)
    assert done.returncode == 0, f"as {TESTER}:\n{tail}"
    assert " passed" in tail, tail
