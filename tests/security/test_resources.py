"""Resource attacks: each ends within the block's limits, leaves nothing
behind, and the executor runs the next block."""

from __future__ import annotations

import contextlib
import os
import resource
import uuid

import pytest

from tests.conftest import marked, wait_dead
from tests.security.conftest import LIMITS, TIMING_OUT, run_then_healthy

pytestmark = pytest.mark.timeout(180)

# A safety net for the host, not part of what is tested: without a pids
# cgroup a fork bomb would exhaust the host's pid space (kernel.pid_max) for
# the whole timeout. Jailed processes run in a user namespace of their own,
# so the inherited RLIMIT_NPROC binds them while this root test process is
# exempt. Far above max_processes=64: the sandbox's own limit is checked by
# test_max_processes_is_enforced.
HOST_SAFETY_NPROC = 4000
# the modes whose blocks run in a kernel that outlives them (a thread a block starts lives on)
KEEPS_THREADS = frozenset({"stateful", "jupyter"})


@contextlib.contextmanager
def _host_safety_net():
    old = resource.getrlimit(resource.RLIMIT_NPROC)
    soft = HOST_SAFETY_NPROC if old[1] == resource.RLIM_INFINITY else min(HOST_SAFETY_NPROC, old[1])
    resource.setrlimit(resource.RLIMIT_NPROC, (soft, old[1]))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, old)


BOMBS = {
    "python-fork": (
        "python",
        "import os, sys\nif sys.argv[-1] != MARK:\n"
        "    os.execv(sys.executable, [sys.executable, __file__, MARK])\n"
        "while True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n",
    ),
    "shell": ("bash", "exec bash -c ':(){ :|:& };:' MARK"),
}


@pytest.mark.parametrize("bomb", list(BOMBS))
@pytest.mark.ends_by_timeout
def test_fork_bomb_ends_and_leaves_nothing(hostile, bomb):
    language, code = BOMBS[bomb]
    marker = f"execbox-security-{uuid.uuid4().hex}"
    code = code.replace("MARK", repr(marker) if language == "python" else marker)
    if language == "python":
        code = f"MARK = {marker!r}\n" + code.replace(repr(marker), "MARK")
    with _host_safety_net():  # a bomb that fills the pids limit may cost the Docker backend its container
        result = run_then_healthy(hostile, language, code, may_restart=True)
    if language == "python":  # the shell bomb's first shell returns at once (exit 0), its forks go on
        assert result.timed_out or result.exit_code != 0
    assert result.duration_s < hostile.limits.timeout_s + 10
    assert wait_dead(marked(marker), timeout=10) == []


def test_max_processes_is_enforced(hostile):
    marker = f"execbox-security-{uuid.uuid4().hex}"
    code = (
        "import subprocess\nstarted = 0\nfor _ in range(200):\n    try:\n"
        f"        subprocess.Popen(['sleep', '30', {marker!r}][:2])\n        started += 1\n"
        "    except OSError:\n        break\nprint('started', started)\n"
    )
    with _host_safety_net():
        result = run_then_healthy(hostile, "python", code)
    assert "started" in result.output, result.output
    started = int(result.output.split("started")[1].split()[0])
    # the block's own interpreter counts too
    assert started + 1 <= LIMITS.max_processes, f"{started} children for max_processes={LIMITS.max_processes}"


@pytest.mark.parametrize("chunk_mb", [2048, 64])
def test_memory_bomb_fails_and_says_why(hostile, chunk_mb):
    code = f"chunks = []\nwhile True:\n    chunks.append(bytearray({chunk_mb} << 20))\n"
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code != 0
    assert not result.timed_out
    assert "memory limit" in result.output, result.output


def test_filling_tmp_hits_its_size_and_is_not_kept(mode, make_hostile):
    # /tmp is memory (tmpfs) and counts against the memory limit: with a limit
    # below the /tmp size (256 MB) the block is killed at the memory limit
    # instead; here the memory limit is above it, so the size cap answers.
    from tests.security.conftest import LIMITS, not_for

    not_for(
        mode,
        "landlock",
        "no private /tmp without a mount namespace: the host's /tmp is closed to the "
        "block, its TMPDIR a folder on the host's disk bounded per file by RLIMIT_FSIZE "
        "(removed after the block: tests/backends/test_landlock.py)",
    )
    hostile = make_hostile(LIMITS.replace(memory_mb=1024))
    code = (
        "import os\nchunk = b'x' * (1 << 20)\nwritten = 0\ntry:\n    with open('/tmp/fill', 'wb') as f:\n"
        "        while written < (4 << 30):\n            f.write(chunk)\n            f.flush()\n"
        "            written += len(chunk)\n    print('NO LIMIT', written)\n"
        "except OSError as exc:\n    print('errno', exc.errno, 'after', written >> 20, 'MB')\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "errno 28" in result.output, result.output  # ENOSPC
    written_mb = int(result.output.split("after")[1].split()[0])
    assert written_mb <= 300
    again = hostile.run(__import__("execbox").CodeBlock("python", "import os\nprint(os.listdir('/tmp'))"))
    if hostile.capabilities.stateful:  # a kernel's /tmp lives as long as its variables do
        assert "fill" in again.output
    else:
        assert "fill" not in again.output


def test_filling_the_workspace_hits_the_file_size_limit(hostile):
    big = hostile.workspace.path / "big.bin"
    code = (
        "chunk = b'x' * (1 << 20)\nwith open('big.bin', 'wb') as f:\n"
        "    for _ in range(2048):\n        f.write(chunk)\nprint('WROTE 2 GB')\n"
    )
    try:
        result = run_then_healthy(hostile, "python", code)
        size = big.stat().st_size if big.exists() else 0
    finally:
        big.unlink(missing_ok=True)
    assert "WROTE 2 GB" not in result.stdout
    assert result.exit_code != 0 and not result.timed_out, result.output
    assert size < 2 << 30


def test_a_gigabyte_of_output_is_cut_and_costs_the_host_little(hostile):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB
    code = "import sys\nchunk = 'x' * (1 << 20) + '\\n'\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
    result = run_then_healthy(hostile, "python", code)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.truncated
    assert len(result.output) < 4 * LIMITS.max_output_bytes
    assert grown_mb < 200, f"the host grew by {grown_mb:.0f} MB"


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("while True:\n    pass\n", id="loop"),
        # the full timeout: a kernel's cell returns at once, and the next one runs beside 16 spinning threads
        pytest.param(
            "import threading\ndef spin():\n    while True:\n        pass\n"
            "for _ in range(16):\n    threading.Thread(target=spin).start()\n",
            id="threads",
        ),
        pytest.param(
            "import os\nfor _ in range(4):\n    if os.fork() == 0:\n        break\nwhile True:\n    pass\n",
            id="processes",
        ),
    ],
)
def test_spinners_time_out(make_hostile, mode, code):
    # the battery's short timeout, but for threads in a kernel that keeps them (the cell returns;
    # 16 spinners hold the GIL against the kernel's answer, which took past 2 s)
    kept = "threading" in code and mode in KEEPS_THREADS
    hostile = make_hostile(LIMITS if kept else TIMING_OUT)
    result = run_then_healthy(hostile, "python", code)
    if hostile.capabilities.stateful and "threading" in code:
        # threads live in the kernel as variables do (a notebook's background
        # work); the cell returns; restart() ends them, and the kernel is fine. Where RLIMIT_AS
        # holds the memory limit (the sandbox's session as a user with no memory cgroup), 16
        # threads' stacks may not fit in it: the block says so and the session goes on
        assert result.exit_code == 0 or "can't start new thread" in result.output, result.output
        hostile.restart()
        assert hostile.run(__import__("execbox").CodeBlock("python", "print(1)")).output == "1\n"
        return
    assert result.timed_out
    assert result.exit_code == 124
    assert result.duration_s < hostile.limits.timeout_s + 5


def test_fd_exhaustion_stays_inside(hostile):
    code = (
        "import os\nfds = []\ntry:\n    while len(fds) < 1_000_000:\n        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
        "    print('NO LIMIT')\nexcept OSError as exc:\n    print('errno', exc.errno, 'after', len(fds))\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "errno 24" in result.output, result.output  # EMFILE
    assert os.open("/dev/null", os.O_RDONLY) >= 0
