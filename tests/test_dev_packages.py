"""What ``./dev.sh`` asks apt-get for on a machine that lacks packages:
``run`` never Node.js (its example is Python; the tests and benchmarks
install it), ``test`` git too, and nothing with its Recommends (nodejs's
alone are ~100 MB).

The machine is this one with some programs hidden: PATH is a folder of
links to every program of /usr/bin and /bin but those, and apt-get (and
sudo) are stand-ins that write down what they were asked and refuse, so
nothing is installed and dev.sh stops there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HIDDEN = {"node", "nodejs", "bwrap", "git", "apt-get", "sudo"}


def _machine_without(tmp_path: Path) -> tuple[Path, Path]:
    bin_dir, asked = tmp_path / "bin", tmp_path / "asked"
    bin_dir.mkdir()
    for folder in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            link = bin_dir / name
            if name not in HIDDEN and not os.path.lexists(link):
                link.symlink_to(os.path.join(folder, name))
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$@" >> {asked}\n[ "$1" = update ] && exit 0\nexit 1\n'
    )
    (bin_dir / "sudo").write_text('#!/bin/sh\nexec "$@"\n')
    for stand_in in ("apt-get", "sudo"):
        (bin_dir / stand_in).chmod(0o755)
    return bin_dir, asked


@pytest.mark.parametrize("job", ["run", "bench"])
def test_dev_sh_asks_for_node_only_for_the_jobs_that_run_it(tmp_path, job):
    bin_dir, asked = _machine_without(tmp_path)
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run(
        [str(ROOT / "dev.sh"), job], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0  # the stand-in refused: dev.sh stops before any other step
    installs = [line.split() for line in asked.read_text().splitlines() if line.startswith("install")]
    assert len(installs) == 1, asked.read_text()
    [install] = installs
    assert "--no-install-recommends" in install, install
    assert "bubblewrap" in install  # it does install what is missing
    assert ("nodejs" in install) == (job == "bench"), install
    assert "git" not in install, install  # only the tests use it
    assert "dev.sh: installing system packages:" in done.stderr


def test_dev_sh_test_asks_for_git_with_which_a_test_lists_the_checkout(tmp_path):
    # a minimal Debian has no git; tests/test_dev_run.py copies the checkout as a clone has it with it
    bin_dir, asked = _machine_without(tmp_path)
    env = {**os.environ, "PATH": str(bin_dir)}
    done = subprocess.run(
        [str(ROOT / "dev.sh"), "test"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0  # the stand-in refused: dev.sh stops before any other step
    [install] = [line.split() for line in asked.read_text().splitlines() if line.startswith("install")]
    assert "git" in install and "nodejs" in install and "--no-install-recommends" in install, install
