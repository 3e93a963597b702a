"""``./dev.sh run`` on a fresh checkout: it says what it does, installs
execbox without the development extras, and runs the example reply on the
default backend (the README's first command, as a new user types it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import require

ROOT = Path(__file__).resolve().parents[1]
# the development extras, none of which `run` needs
DEV_ONLY = ("ray", "playwright", "autogen", "autogen_core", "schemathesis", "jupyter_client", "docker", "mcp")


def _checkout(dest: Path, root: Path = ROOT) -> None:
    """The repository's files as a clone has them (tracked, and new ones
    not ignored): no .venv, no caches. Where this checkout is no git work
    tree (its files copied, as scripts/fresh-container.sh does, or unpacked
    from an archive), an empty repository's view of them: every file that
    .gitignore does not leave out."""
    require("git", shutil.which("git") is not None, "apt-get install git (./dev.sh test does)")
    toplevel = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], cwd=root, capture_output=True, text=True
    )
    with tempfile.TemporaryDirectory() as empty:
        git = ["git"]
        if toplevel.returncode != 0 or Path(toplevel.stdout.strip()).resolve() != root.resolve():
            subprocess.run(["git", "init", "-q", empty], check=True, timeout=60)
            git = ["git", f"--git-dir={empty}/.git", f"--work-tree={root}"]
        listed = subprocess.run(
            [*git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=root,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = root / os.fsdecode(name)
        if not source.is_file():
            continue  # a file deleted in the tree, not yet in the index
        target = dest / os.fsdecode(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target)


def _size(path: Path) -> int:
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def test_a_copied_checkout_without_git_is_copied_as_a_clone_has_it(tmp_path):
    # scripts/fresh-container.sh copies the working tree without .git: the ignored files stay out still
    copy = tmp_path / "copy"
    for name, text in {
        ".gitignore": ".venv/\n*.pyc\n",
        "dev.sh": "x",
        "src/a.py": "y",
        "src/a.pyc": "z",
    }.items():
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        (copy / name).write_text(text)
    (copy / ".venv" / "bin").mkdir(parents=True)
    (copy / ".venv" / "bin" / "python").write_text("")
    _checkout(tmp_path / "out", copy)
    made = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert made == [".gitignore", "dev.sh", "src/a.py"], made


def test_dev_sh_run_installs_the_core_alone_and_runs_the_example(tmp_path):
    repo = tmp_path / "execbox"
    _checkout(repo)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    done = subprocess.run(["./dev.sh", "run"], cwd=repo, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    # it says what it is doing before each slow step
    assert "dev.sh: creating .venv" in done.stderr
    assert "dev.sh: installing execbox (core and sandbox" in done.stderr
    # and pip says what it installs, a line per package (it was a silent `pip -q`)
    assert "dev.sh: pip: Installing collected packages:" in done.stderr, done.stderr
    assert "dev.sh: pip: Successfully installed" in done.stderr
    assert "dev.sh: running examples/reply.md" in done.stderr
    # the example ran: the sieve's primes, counted from the shell
    assert "count: 15" in done.stdout
    venv = repo / ".venv"
    [site] = list(venv.glob("lib/python3*/site-packages"))
    present = [name for name in DEV_ONLY if (site / name).exists()]
    assert present == [], f"./dev.sh run installed development extras: {present}"
    # under a third of the development venv's ~1.1 GB
    assert _size(venv) < 350 * 2**20
    # a second run installs nothing again
    again = subprocess.run(
        ["./dev.sh", "run"], cwd=repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr[-4000:]
    assert "installing" not in again.stderr
