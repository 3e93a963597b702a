"""The sandbox inside a container started with the engine's defaults, as a
service is deployed: the engine's default seccomp profile (and AppArmor
profile, where the host has AppArmor), a user who is not root, no bubblewrap
in the image. The default executor runs its blocks in the Landlock tier
there.

Seen before: no block ran at all ("a block could not be confined in the
Landlock tier: join a session keyring of its own: keyctl: Operation not
permitted"): Docker's profile refuses keyctl.

The promise suite (tests/hosts/test_promise.py, the default executor) runs
in the container with the image's Python: this checkout's src and tests
bound read-only, pytest from this interpreter's site-packages. Without
Docker, a seccomp filter of the test's own stands in for the profile's
keyctl refusal, and for a filter that refuses only joining a keyring (the
session keyring stays reachable: the block must not start).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest

from tests.conftest import REQUIRE_ALL, require, require_docker

CHECKOUT = Path(__file__).resolve().parents[2]
USER = "65534:65534"  # nobody: a user who is not root, as the image has it
WAIT_S = 400

DEFAULT = """
import os, shutil, warnings
from execbox import CodeBlock, SandboxExecutor
status = dict(line.split(':', 1) for line in open('/proc/self/status') if ':' in line)
try:
    apparmor = open('/proc/self/attr/current').read().strip()
except OSError:
    apparmor = 'none'
print('HOST uid', os.getuid(), 'bwrap', shutil.which('bwrap'), 'seccomp', status['Seccomp'].strip(),
      'apparmor', apparmor.replace(' ', '_'))
with warnings.catch_warnings():
    warnings.simplefilter('ignore')
    with SandboxExecutor(workspace='/tmp/default-ws') as executor:
        result = executor.run(CodeBlock('python', 'print(6*7)'))
        print('DEFAULT', executor.isolation_in_use, repr(result.output))
"""


def _script(version: tuple[int, int], timeout_plugin: bool) -> str:
    plugins = "-p pytest_timeout" if timeout_plugin else ""
    return (
        "set -e\nmkdir -p /tmp/home\ncd /execbox\n"
        f"python3 -c 'import sys; sys.exit(0 if sys.version_info[:2] == {version!r} else 3)' || "
        '{ echo PYTHON "$(python3 -V)"; exit 3; }\n'
        f'python3 -c "$DEFAULT_CHECK"\n'
        f"python3 -m pytest tests/hosts/test_promise.py -k pool {plugins} -p no:cacheprovider -q -rA "
        "--basetemp=/tmp/run\n"
    )


def test_the_default_sandbox_keeps_its_promise_in_a_container_with_the_engines_defaults():
    require_docker()
    from execbox._docker_engine import docker_client
    from execbox.backends.sandbox._landlock_tier import landlock_problem
    from execbox.images import base_tag

    problem = landlock_problem()
    require("Landlock", problem is None, problem or "")
    deps = sysconfig.get_paths()["purelib"]
    require(
        "pytest for the image's Python",
        importlib.util.find_spec("pytest") is not None
        and str(Path(importlib.util.find_spec("pytest").origin).parents[1]) == deps,
        f"pytest installed in {deps}, bound into the container",
    )
    client = docker_client()
    version = sys.version_info[:2]
    script = _script(version, importlib.util.find_spec("pytest_timeout") is not None)
    began = time.monotonic()
    container = client.containers.run(
        base_tag(),
        ["sh", "-c", script],
        detach=True,
        user=USER,
        init=True,  # --init reaps orphans
        environment={
            "PYTHONPATH": "/execbox/src:/execbox:/deps",
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "HOME": "/tmp/home",
            "LANG": "C.UTF-8",
            "DEFAULT_CHECK": DEFAULT,
        },
        volumes={
            str(CHECKOUT / "src"): {"bind": "/execbox/src", "mode": "ro"},
            str(CHECKOUT / "tests"): {"bind": "/execbox/tests", "mode": "ro"},
            str(CHECKOUT / "pyproject.toml"): {"bind": "/execbox/pyproject.toml", "mode": "ro"},
            deps: {"bind": "/deps", "mode": "ro"},
        },
        labels={"execbox.test": "container-host"},
    )
    try:
        status = container.wait(timeout=WAIT_S)["StatusCode"]
        out = container.logs().decode(errors="replace")
    finally:
        container.remove(force=True)
    print(f"\nin the container ({time.monotonic() - began:.1f} s):\n{out[-3000:]}")
    if status == 3 and out.startswith("PYTHON"):
        require(
            "the image's Python",
            False,
            f"{out.strip()} in the image, {version} here: pytest cannot be bound in",
        )
    host = next((line.split()[1:] for line in out.splitlines() if line.startswith("HOST ")), None)
    assert host is not None, out[-3000:]
    fields = dict(zip(host[::2], host[1::2], strict=False))
    assert fields["uid"] != "0" and fields["bwrap"] == "None" and fields["seccomp"] == "2", (
        host
    )  # the host class
    assert "DEFAULT landlock '42\\n'" in out, out[-3000:]
    assert status == 0, out[-3000:]
    summary = out.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    ran = [line for line in out.splitlines() if line.startswith("PASSED tests/hosts/test_promise.py")]
    assert len(ran) >= 5, out[-3000:]  # every promise ran: none skipped
    if REQUIRE_ALL:
        assert "SKIPPED" not in out, out[-3000:]


# Runs with a seccomp filter refusing keyctl (EPERM): all of it, as Docker's
# default profile does, or only KEYCTL_JOIN_SESSION_KEYRING (1).
FILTERED = """
import ctypes, os, struct, sys, warnings
from execbox import BackendUnavailableError, CodeBlock, SandboxExecutor
nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
eperm, allow = 0x00050000 | 1, 0x7FFF0000
if sys.argv[1] == "all":
    prog = [(0x20, 0, 0, 0), (0x15, 0, 1, nr), (0x06, 0, 0, eperm), (0x06, 0, 0, allow)]
else:
    prog = [(0x20, 0, 0, 0), (0x15, 0, 3, nr), (0x20, 0, 0, 16), (0x15, 0, 1, 1), (0x06, 0, 0, eperm),
            (0x06, 0, 0, allow)]
code = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
buf = ctypes.create_string_buffer(code)
fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    try:
        with SandboxExecutor(workspace=sys.argv[2], isolation="landlock") as executor:
            block = "import ctypes; print(ctypes.CDLL(None, use_errno=True).syscall(nr, 0, -3, 0))"
            print("ran", repr(executor.run(CodeBlock("python", f"nr = {nr}\\n{block}")).output))
    except BackendUnavailableError as exc:
        print("refused", exc)
"""


# keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0): the errno, or 0 where the keyring answers
KEYRING_PROBE = """
import ctypes, os
nr = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
libc = ctypes.CDLL(None, use_errno=True)
print(ctypes.get_errno() if libc.syscall(nr, 0, -3, 0) == -1 else 0)
"""


def _keyctl_refused_here() -> str | None:
    """Why keyctl is refused to this process's children already (None: the
    session keyring answers), probed in a child: inside a container Docker's
    default seccomp profile refuses keyctl with EPERM."""
    done = subprocess.run(
        [sys.executable, "-c", KEYRING_PROBE], capture_output=True, text=True, timeout=60, check=True
    )
    code = int(done.stdout.strip())
    return None if code == 0 else f"keyctl is refused here already ({os.strerror(code)})"


@pytest.mark.parametrize("refused", ["all", "join-only"])
def test_a_profile_refusing_keyctl_lets_blocks_run_only_if_the_keyring_is_out_of_reach(tmp_path, refused):
    from execbox.backends.sandbox._landlock_tier import landlock_problem

    problem = landlock_problem()
    require("Landlock", problem is None, problem or "")
    if refused == "join-only" and (why := _keyctl_refused_here()):
        # the case's premise is a reachable session keyring; here none is, so the block may run
        pytest.skip(
            f"{why}, as a container's seccomp profile (Docker's default) does: the session keyring is "
            "out of reach, so a filter refusing only the join cannot leave it reachable (case 'all' runs)"
        )
    done = subprocess.run(
        [sys.executable, "-c", FILTERED, refused, str(tmp_path / "ws")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=CHECKOUT,
        env={**os.environ, "PYTHONPATH": str(CHECKOUT / "src")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if refused == "all":  # the block runs, and the session keyring is refused to it too
        assert done.stdout == "ran '-1\\n'\n", done.stdout + done.stderr
    else:  # joining refused but the session keyring reachable: no block starts
        assert done.stdout.startswith("refused "), done.stdout + done.stderr
        assert "keyring" in done.stdout and "keyctl: Operation not permitted" in done.stdout, done.stdout
