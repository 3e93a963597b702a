"""README's Ray example runs as written on a real cluster (``address="auto"``
finds it through RAY_ADDRESS, as on a machine that joined one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import ray

from execbox import extract_code_blocks
from tests.ray._cluster import shared_cluster

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_the_readme_runs_a_block_on_the_cluster(tmp_path):
    cluster = shared_cluster()
    [example] = [b for b in extract_code_blocks(README) if 'create_executor("ray"' in b.code]
    assert len(example.code.strip().splitlines()) == 3
    env = {**os.environ, "RAY_ADDRESS": cluster.address, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", example.code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    node = done.stdout.strip().splitlines()[-1]
    assert node in {n["NodeID"] for n in ray.nodes()}
