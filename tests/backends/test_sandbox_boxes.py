"""The pool's boxes (``_zygote/box.py``, ``_pool``): a box is made once and
kept for block after block; what a block changes of its box outside the
workspace is undone, or the box is thrown away and replaced; the kernel's
counts (OOM kills, peak memory) are the block's own; no signal of a block's
takes the box's init down. The successor battery (tests/security/
test_successor.py) checks that no trace of a block reaches the next."""

from __future__ import annotations

import os

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor
from execbox.jail._cgroups import cgroup_support
from tests.conftest import require_namespaces


def _run(executor: SandboxExecutor, code: str):
    return executor.run(CodeBlock("python", code))


@pytest.fixture
def one_box(tmp_path):
    require_namespaces()
    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=1, limits=Limits(timeout_s=20)) as executor:
        yield executor


def test_blocks_reuse_their_boxes(one_box):
    pids = {_run(one_box, "import os\nprint(os.getpid())").output for _ in range(20)}
    health = one_box.pool_health
    assert health["boxes_made"] == 1 and health["boxes_replaced"] == 0, health
    # one box, yet each block a process of its own
    assert len(pids) == 20, pids


@pytest.mark.parametrize(
    "change",
    [
        "os.chmod('/tmp', 0o700)",
        "os.chmod('/dev/shm', 0o755)",
    ],
)
def test_a_box_whose_skeleton_a_block_changed_is_replaced(one_box, change):
    assert _run(one_box, f"import os\n{change}\nprint('changed')").output == "changed\n"
    after = _run(
        one_box,
        "import os, stat\nprint(oct(stat.S_IMODE(os.stat('/tmp').st_mode)),"
        " oct(stat.S_IMODE(os.stat('/dev/shm').st_mode)))",
    )
    assert after.output == "0o1777 0o1777\n", after.output
    health = one_box.pool_health
    assert health["boxes_replaced"] == 1 and health["boxes_made"] == 2, health


def test_what_a_block_leaves_in_tmp_is_emptied_and_the_box_kept(one_box):
    plant = (
        "import os\n"
        "os.makedirs('/tmp/a/b/c'); open('/tmp/a/b/c/f', 'w').write('x')\n"
        "os.chmod('/tmp/a/b', 0); os.mkfifo('/dev/shm/fifo'); os.symlink('/etc/passwd', '/tmp/link')\n"
        "print(sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')))"
    )
    planted = _run(one_box, plant).output
    assert "'a'" in planted and "'fifo'" in planted, planted
    # the workspace (a bind under /tmp) is kept: its folder, and only it, is left in /tmp
    seen = _run(one_box, "import os\nprint(sorted(os.listdir('/tmp')), os.listdir('/dev/shm'))").output
    assert "'a'" not in seen and "'link'" not in seen and seen.endswith("[]\n"), seen
    health = one_box.pool_health
    assert health["boxes_made"] == 1 and health["boxes_replaced"] == 0, health


def test_no_signal_of_a_block_ends_its_boxs_init(one_box):
    names = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM", "SIGPIPE", "SIGSTOP"]
    code = "import os, signal\n" + "".join(f"os.kill(1, signal.{n})\n" for n in names) + "print('sent')"
    assert _run(one_box, code).output == "sent\n"
    assert _run(one_box, "print('next')").output == "next\n"
    health = one_box.pool_health
    assert health["boxes_made"] == 1 and health["boxes_replaced"] == 0, health


def test_a_block_interrupted_by_its_own_sigint_still_sees_keyboardinterrupt(one_box):
    # the init ignores SIGINT; the block's process starts with Python's own handler again
    result = _run(one_box, "import os, signal\nos.kill(os.getpid(), signal.SIGINT)")
    assert "KeyboardInterrupt" in result.output, result.output


def _memory_cgroups() -> None:
    support, why = cgroup_support()
    if support is None:
        pytest.skip(f"no cgroups here: {why}")


def test_the_counts_of_a_box_are_each_blocks_own(tmp_path):
    require_namespaces()
    _memory_cgroups()
    limits = Limits(timeout_s=30, memory_mb=256)
    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=1, limits=limits) as executor:
        big = _run(executor, "x = bytearray(120 << 20)\nprint(len(x))")
        killed = _run(executor, "x = bytearray(600 << 20)\nprint(len(x))")
        small = _run(executor, "print('small')")
        assert executor.pool_health["boxes_made"] == 1, executor.pool_health
    assert big.exit_code == 0 and killed.exit_code != 0
    assert killed.error is not None and killed.error.name == "MemoryLimit", killed.error
    # the OOM kill is the killed block's alone; the small block's peak is not the big one's
    assert small.exit_code == 0 and small.error is None, small.error
    peak_big, peak_small = big.blocks[0].peak_memory_mb, small.blocks[0].peak_memory_mb
    if peak_big is None or peak_small is None:
        pytest.skip("this kernel cannot reset a cgroup's peak memory (cgroup v2 before Linux 6.12)")
    assert peak_big >= 120 and peak_small < 60, (peak_big, peak_small)


def test_memory_cgroups_stay_flat_over_many_blocks(tmp_path):
    """Each box has one cgroup for its life: blocks make none."""
    require_namespaces()
    _memory_cgroups()
    support, _ = cgroup_support()
    assert support is not None
    memory = support.bases.get("memory") or next(iter(support.bases.values()))

    def groups() -> int:
        return sum(1 for _ in os.scandir(memory) if _.is_dir()) if memory.exists() else 0

    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=2, limits=Limits(timeout_s=20)) as executor:
        _run(executor, "print(0)")
        before = groups()
        for i in range(100):
            assert _run(executor, f"print({i})").output == f"{i}\n"
        during = groups()
        assert executor.pool_health["boxes_made"] <= 3, executor.pool_health
    assert during <= before + 1, (before, during)


def test_a_box_a_block_filled_with_files_is_replaced_not_wiped_one_by_one(one_box):
    # past MAX_WIPED entries the box goes whole: the kernel frees its tmpfs, the next block waits for none
    made = _run(one_box, "import os\nfor i in range(12000): open(f'/tmp/f{i}', 'w').close()\nprint('made')")
    assert made.output == "made\n", made.output
    left = "import os\nprint(sum(n[0] == 'f' and n[1:].isdigit() for n in os.listdir('/tmp')))"
    assert _run(one_box, left).output == "0\n"  # none of the block's files (the kept binds' folders stay)
    health = one_box.pool_health
    assert health["boxes_replaced"] == 1 and health["boxes_made"] == 2, health
