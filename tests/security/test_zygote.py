"""The pool's zygote is not the caller's to configure: it starts with
``python -I`` and an environment built from nothing, so a caller's
``PYTHONPATH`` (a service client's ``env``) with a ``sitecustomize.py`` in
the workspace never runs code in it; it has a seccomp filter of its own
(only namespaces and mounts for its units beyond what blocks get). The
caller's variables still reach the blocks."""

from __future__ import annotations

import os

import pytest

from execbox import CodeBlock, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from tests.backends.test_sandbox_pool_load import _tree
from tests.conftest import require

PLANT = "import os\nopen(os.path.join({folder!r}, f'ran-in-{{os.getpid()}}'), 'w').close()\n"


def _status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)


def test_a_callers_pythonpath_runs_nothing_in_the_zygote(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "lib").mkdir()
    (folder / "lib" / "sitecustomize.py").write_text(PLANT.format(folder=str(folder)))
    (folder / "lib" / "helper_mod.py").write_text("VALUE = 42\n")
    os.chmod(folder, 0o777)
    with SandboxExecutor(workspace=Workspace(folder), env={"PYTHONPATH": "lib", "MARK": "m"}) as ex:
        ran = ex.run(
            CodeBlock("python", "import os, helper_mod\nprint(helper_mod.VALUE, os.environ['MARK'])")
        )
        assert ran.output == "42 m\n", ran.output  # the blocks still get the caller's variables
        assert not [p for p in os.listdir(folder) if p.startswith("ran-in-")], (
            "sitecustomize ran in the zygote"
        )
        zygotes = []
        for pid in _tree(ex._zygote._proc.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except FileNotFoundError:  # a unit's process that ended since the tree was read
                continue
            if any(arg.endswith(b"/zygote.py") for arg in argv[1:4]):
                zygotes.append((pid, argv))
        assert zygotes, "no zygote found"
        for pid, argv in zygotes:
            assert argv[1] == b"-I", argv
            assert _status(pid)["Seccomp"].strip() == "2", f"process {pid} of the pool has no seccomp filter"
            with open(f"/proc/{pid}/environ", "rb") as handle:
                environ = handle.read()
            assert b"PYTHONPATH" not in environ and b"MARK" not in environ, environ


@pytest.mark.parametrize("pool", [True, False], ids=["pool", "one_shot"])
def test_pid_1_shows_no_host_layout(tmp_path, pool):
    """bwrap is the jail's PID 1: its options (every host path bound, the
    environment, the limits) come from a memfd, and the zygote's settings
    from its socket, so /proc/1/cmdline names none of them."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    workspace = tmp_path / "ws"
    with SandboxExecutor(workspace=workspace, pool=pool, env={"PLANTED": "value-of-the-caller"}) as ex:
        seen = ex.run(CodeBlock("sh", "tr '\\0' ' ' < /proc/1/cmdline")).output
    assert seen.startswith(find_bwrap()), seen
    for leak in (
        "--ro-bind",
        "--setenv",
        "--seccomp",
        "value-of-the-caller",
        str(workspace),
        "rlimits",
        '/.execbox-zygote"',
    ):
        assert leak not in seen, (leak, seen)
