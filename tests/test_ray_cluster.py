"""The ray backend on a real multi-node Ray cluster: tests/ray (node loss,
admission, a pinned kernel) and the contract suite's ``ray`` executors,
run by a child pytest inside a network namespace of its own that has only
``lo`` (``unshare -n``), so that nothing of Ray listens off loopback
(tests/ray/_cluster.py says why). One cluster for the child's whole run.

This is the test that is required under EXECBOX_REQUIRE=all (root,
``unshare``, Ray); the ``ray`` contract fixture itself skips outside the
namespace.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
CHILD_TIMEOUT_S = 480


@pytest.mark.timeout(CHILD_TIMEOUT_S + 60)
def test_ray_backend_on_a_local_cluster():
    require("ray", importlib.util.find_spec("ray") is not None, "pip install 'execbox[ray]' (./dev.sh does)")
    require(
        "a network namespace",
        os.geteuid() == 0 and shutil.which("unshare") is not None and shutil.which("ip") is not None,
        "run as root with util-linux's unshare and iproute2's ip",
    )
    argv = [
        sys.executable,
        "-m",
        "pytest",
        "tests/ray",
        "tests/contract",
        "-k",
        "ray",
        "-q",
        "-p",
        "no:cacheprovider",
        "-o",
        "addopts=",
    ]
    script = 'ip link set lo up && exec "$@"'
    env = {**os.environ, "EXECBOX_RAY_NETNS": "1", "PYTHONPATH": str(ROOT / "src")}
    started = time.monotonic()
    child = subprocess.Popen(
        ["unshare", "-n", "sh", "-c", script, "sh", *argv],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = child.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the child, its cluster's nodes and their workers
        output, _ = child.communicate()
        pytest.fail(f"the ray tests did not finish within {CHILD_TIMEOUT_S} s:\n{output[-8000:]}")
    took = time.monotonic() - started
    summary = [
        line for line in output.splitlines() if " passed" in line or " failed" in line or " error" in line
    ]
    print(f"ray tests in their namespace: {summary[-1] if summary else 'no summary'} ({took:.0f} s)")
    assert child.returncode == 0, output[-12000:]
    assert summary and " failed" not in summary[-1], output[-12000:]
