"""Host processes: invisible and unreachable; and what a block starts ends
with it (daemons, stdout holders, stopped processes)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import marked, process_alive, wait_dead
from tests.security.conftest import DOCKER_MODES, not_for, run_then_healthy


@pytest.fixture
def host_sleeper():
    proc = subprocess.Popen(["sleep", "30"])
    yield proc
    proc.kill()
    proc.wait()


def test_test_process_is_not_signalable(hostile):
    me = os.getpid()
    code = (
        f"import os, signal\nfor sig in (0, signal.SIGTERM):\n    try:\n        os.kill({me}, sig)\n"
        f"        print('SIGNALLED', sig)\n    except OSError as exc:\n        print('failed', exc.errno)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "SIGNALLED" not in result.output
    assert result.output.count("failed") == 2


@pytest.mark.parametrize("how", ["pid", "group", "everyone"])
def test_host_process_survives_kill_attempts(hostile, host_sleeper, how):
    pid = host_sleeper.pid
    code = {
        "pid": f"import os\nos.kill({pid}, 9)",
        "group": f"import os\nos.killpg({os.getpgid(pid)}, 9)",
        "everyone": "import os, signal\nos.kill(-1, signal.SIGKILL)\nprint('sent')",
    }[how]
    run_then_healthy(hostile, "python", code)
    assert process_alive(pid)
    assert process_alive(os.getpid())


# What a container runs besides the block: the engine's init, the keep-alive,
# execbox's sh wrapper around the block (its script holds newlines) and killer.
# the engine's init over the keep-alive or over the agent (its shell exec's python3), the block
CONTAINER_OWN = (
    "/sbin/docker-init -- sleep infinity",
    "/sbin/docker-init -- /bin/sh -c ",
    "sleep infinity",
    "/bin/sh -c ",
    "python3 ",
)


def test_host_processes_are_invisible_in_proc(mode, hostile):
    not_for(
        mode,
        "landlock",
        "no PID namespace in this tier: host processes and their command lines are "
        "listed in /proc (their environment, memory and descriptors stay refused)",
    )
    host_init = open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace").strip()
    code = (
        "import os\nfor p in sorted(os.listdir('/proc')):\n    if p.isdigit():\n"
        "        cmdline = open(f'/proc/{p}/cmdline', 'rb').read()\n"
        "        print(p, cmdline.replace(b'\\0', b' ').replace(b'\\n', b' ').decode())\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    seen = [line.split(" ", 1)[1] if " " in line else "" for line in result.output.splitlines()]
    # only the jail's own: bwrap, and the interpreter (the pool's zygote and units, the block)
    python = getattr(hostile, "_python", None) or os.path.realpath(sys.executable)
    # the jailed kernel starts by its bare name (test_no_process_in_the_jail_names_the_host_layout)
    own = (
        CONTAINER_OWN
        if mode in DOCKER_MODES
        else (
            "/usr/bin/bwrap",
            python,
            sys.executable,
            os.path.basename(python) + " ",
            os.path.basename(sys.executable) + " ",
        )
    )
    assert all(c == "" or c.startswith(own) for c in seen), seen
    assert str(os.getpid()) not in result.output.split()
    me = (
        open(f"/proc/{os.getpid()}/cmdline", "rb")
        .read()
        .replace(b"\0", b" ")
        .decode(errors="replace")
        .strip()
    )
    assert me not in result.output
    if host_init:
        assert host_init not in result.output


LIST_PROCESSES = """
import os
for p in os.listdir('/proc'):
    if p.isdigit():
        for what in ('cmdline', 'environ'):
            try:
                with open(f'/proc/{p}/{what}', 'rb') as handle:
                    print(p, what, handle.read(1 << 20).hex())
            except OSError:
                pass
"""


def test_no_process_in_the_jail_names_the_host_layout(mode, hostile):
    """Security issue 27, item 9: the argv and environment of every process
    a block can read in /proc (bwrap as the jail's PID 1, the pool's
    zygote, the jailed kernel) name no host path: not the repository, the
    interpreter's venv or base, the workspace's host path, a runtime or
    staging folder, bwrap's options, nor a 256-bit key (the kernel's). In
    the environments, PATH and PWD are the block's own (its interpreter's
    folder first, its working folder) and are left out."""
    not_for(mode, "landlock", "no PID namespace in this tier: the host's processes are listed")
    not_for(mode, "remote", "the jail behind it is the pool mode's, attacked there")
    result = run_then_healthy(hostile, "python", LIST_PROCESSES)
    assert result.exit_code == 0, result.output
    repository = str(Path(__file__).resolve().parents[2])
    leaks = {
        repository,
        sys.prefix,
        sys.base_prefix,
        os.path.realpath(sys.prefix),
        os.path.realpath(sys.base_prefix),
        str(hostile.workspace.path),
        os.path.realpath(hostile.workspace.path),
        "execbox-kernel-",
        "execbox-stage-",
        "--ro-bind",
        "--setenv",
        "--seccomp",
    }
    seen = 0
    for line in result.output.splitlines():
        pid, what, data = line.split(" ")
        items = bytes.fromhex(data).decode(errors="replace").split("\0")
        if what == "environ":
            items = [item for item in items if not item.startswith(("PATH=", "PWD="))]
        text = " ".join(items)
        seen += what == "cmdline" and bool(text.strip())
        assert not [leak for leak in leaks if leak in text], (pid, what, text)
        assert not re.search("[0-9a-f]{64}", text), (pid, what, text)
    assert seen >= 2, result.output  # at least the jail's PID 1 and the block's own process


def test_ptrace_of_a_host_process_fails(hostile, host_sleeper):
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nPTRACE_ATTACH, PTRACE_SEIZE = 16, 0x4206\n"
        f"for pid in ({os.getpid()}, {host_sleeper.pid}):\n"
        "    for req in (PTRACE_ATTACH, PTRACE_SEIZE):\n"
        "        r = libc.ptrace(req, pid, 0, 0)\n"
        "        print('ATTACHED' if r == 0 else 'failed', pid, ctypes.get_errno())\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "ATTACHED" not in result.output
    assert result.output.count("failed") == 4
    status = open(f"/proc/{host_sleeper.pid}/status").read()
    assert "TracerPid:\t0" in status


def test_ptrace_traceme_gives_nothing_outside(hostile, secret):
    # Being traced by the parent (the jail's init) is harmless; it must not open the host.
    secret_path, token = secret
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('traceme', libc.ptrace(0, 0, 0, 0))\n"
        f"try:\n    print(open({str(secret_path)!r}).read())\nexcept OSError as exc:\n    print('failed', exc.errno)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert token not in result.output
    assert "failed" in result.output


DAEMON = r"""
import os, sys, time
MARK = "{marker}"
if os.fork() == 0:
    os.setsid()
    {second_fork}
    os.execve(sys.executable, [sys.executable, "-c",
        "import sys, time\nwhile True:\n    open('beat.txt', 'a').write('.')\n    time.sleep(0.1)\n", MARK],
        {env})
time.sleep(0.5)
print("daemon started", flush=True)
{tail}
"""


def _assert_daemon_ended(executor, marker: str) -> None:
    """The daemon DAEMON started is dead: seen from the host (runc, bubblewrap)
    and by its heartbeat in the workspace (also under gVisor, whose processes
    the host does not see)."""
    beat = executor.workspace.path / "beat.txt"
    assert beat.exists()
    assert wait_dead(marked(marker)) == []
    size = beat.stat().st_size
    time.sleep(0.5)
    assert beat.stat().st_size == size, "a daemon still writes in the workspace"


@pytest.mark.parametrize("second_fork", [False, True], ids=["setsid", "double-fork"])
@pytest.mark.parametrize("env", ["inherited", "cleared"])
@pytest.mark.parametrize("ending", ["exit", "timeout"])
@pytest.mark.ends_by_timeout
def test_daemons_do_not_outlive_the_block(hostile, second_fork, env, ending):
    marker = f"execbox-security-{uuid.uuid4().hex}"
    code = (
        DAEMON.replace("{marker}", marker)
        .replace("{second_fork}", "if os.fork() != 0: os._exit(0)" if second_fork else "pass")
        # a cleared environment drops the run token execbox looks for
        .replace("{env}", "dict(os.environ)" if env == "inherited" else "{}")
        .replace("{tail}", "time.sleep(60)" if ending == "timeout" else "")
    )
    result = run_then_healthy(hostile, "python", code)
    assert "daemon started" in result.output
    assert result.timed_out == (ending == "timeout")
    _assert_daemon_ended(hostile, marker)


@pytest.mark.ends_by_timeout
@pytest.mark.parametrize("ending", ["exit", "timeout"])
def test_a_daemon_with_a_forged_run_token_does_not_outlive_the_block(hostile, ending):
    # the token of a block that does not run: clean-up must not take it for another block's process
    marker = f"execbox-security-{uuid.uuid4().hex}"
    code = (
        DAEMON.replace("{marker}", marker)
        .replace("{second_fork}", "if os.fork() != 0: os._exit(0)")
        .replace("{env}", "{'EXECBOX_RUN_TOKEN': '0' * 24}")
        .replace("{tail}", "time.sleep(60)" if ending == "timeout" else "")
    )
    result = run_then_healthy(hostile, "python", code)
    assert "daemon started" in result.output, result.output
    assert result.timed_out == (ending == "timeout")
    _assert_daemon_ended(hostile, marker)


# Planted for whatever Python execbox itself runs near the block to clean up
# after it: modules in the workspace (the working directory, first on the path
# of `python -c`) and a .pth in the user site (HOME is writable), each ending
# the process that loads it at once. The daemon imports none of them.
PLANT = r"""
import os, site
for name in ("signal", "subprocess", "json", "struct", "threading", "select", "selectors", "shutil", "psutil"):
    open(name + ".py", "w").write("import os\nos._exit(0)\n")
try:
    os.makedirs(site.getusersitepackages(), exist_ok=True)
    with open(os.path.join(site.getusersitepackages(), "execbox-test.pth"), "w") as pth:
        pth.write("import sys; sys.argv[:1] == ['-c'] and {marker!r} not in sys.argv and __import__('os')._exit(0)\n")
except OSError:
    pass
"""


@pytest.mark.ends_by_timeout
@pytest.mark.parametrize("ending", ["exit", "timeout"])
def test_planted_modules_do_not_keep_daemons_alive(hostile, ending):
    marker = f"execbox-security-{uuid.uuid4().hex}"
    code = PLANT.replace("{marker!r}", repr(marker)) + (
        DAEMON.replace("{marker}", marker)
        .replace("{second_fork}", "pass")
        .replace("{env}", "{}")
        .replace("{tail}", "time.sleep(60)" if ending == "timeout" else "")
    )
    result = run_then_healthy(hostile, "python", code)
    assert "daemon started" in result.output, result.output
    assert result.timed_out == (ending == "timeout")
    _assert_daemon_ended(hostile, marker)


@pytest.mark.parametrize(
    "code",
    [
        "sleep 100 &\necho started",
        "(sleep 100; echo late) &\necho started",
        "nohup sleep 100 >/dev/null 2>&1 &\nsetsid sleep 100 &\necho started",
    ],
    ids=["background", "subshell", "nohup-setsid"],
)
def test_a_background_child_does_not_hold_the_block(hostile, code):
    result = run_then_healthy(hostile, "sh", code)
    assert result.exit_code == 0, result.output
    assert "started" in result.output
    assert not result.timed_out


def test_closing_stdout_and_stderr_early(hostile):
    code = "import os, time\nprint('bye', flush=True)\nos.close(1)\nos.close(2)\ntime.sleep(1)\nopen('done.txt', 'w').write('x')\n"
    result = run_then_healthy(hostile, "python", code)
    assert "bye" in result.output
    assert not result.timed_out
    assert result.exit_code == 0
    assert (hostile.workspace.path / "done.txt").exists()


@pytest.mark.ends_by_timeout
def test_closed_pipes_and_endless_loop_still_time_out(hostile):
    result = run_then_healthy(
        hostile, "python", "import os\nos.close(1)\nos.close(2)\nwhile True:\n    pass\n"
    )
    assert result.timed_out
    assert result.exit_code == 124


@pytest.mark.ends_by_timeout
def test_stopping_itself_ends_by_timeout(hostile):
    # A kernel's output leaves through threads of the stopped process (ipykernel's IOPub thread, ZeroMQ's
    # I/O thread): the short pause lets "stopping" leave before the whole process stops, as a pipe would.
    result = run_then_healthy(
        hostile,
        "python",
        "import os, signal, time\nprint('stopping', flush=True)\n"
        "time.sleep(0.5)\nos.kill(os.getpid(), signal.SIGSTOP)\n"
        "print('resumed')",
    )
    assert "stopping" in result.output
    assert "resumed" not in result.output
    assert result.timed_out and result.exit_code == 124


@pytest.mark.ends_by_timeout
def test_signal_storm_inside_the_jail(hostile, host_sleeper):
    code = (
        "import os, signal\nfor sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL):\n"
        "    for target in (1, -1, 0):\n        try:\n            os.kill(target, sig)\n"
        "        except OSError:\n            pass\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code != 0 or result.timed_out  # it killed itself
    assert process_alive(host_sleeper.pid)
