"""Sandbox limits: cgroups (memory, processes, CPU), rlimits, seccomp; in
the pool and one-shot."""

from __future__ import annotations

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor
from execbox.backends.sandbox import find_bwrap
from execbox.jail._cgroups import cgroup_support
from tests.conftest import require

MODES = ["pool", "oneshot"]


def _make(tmp_path, mode: str, **options) -> SandboxExecutor:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=tmp_path / "ws", pool=mode == "pool", **options)


def _need_cgroups() -> None:
    support, reason = cgroup_support()
    require("cgroups", support is not None, reason)


@pytest.mark.parametrize("mode", MODES)
def test_memory_exhaustion_is_reported_as_the_limit(tmp_path, mode):
    _need_cgroups()
    code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))"
    with _make(tmp_path, mode, limits=Limits(timeout_s=30, memory_mb=128)) as ex:
        result = ex.run(CodeBlock("python", code))
        assert result.exit_code == 137
        assert result.error is not None and result.error.name == "MemoryLimit"
        assert "memory limit 128 MB exceeded (Limits.memory_mb)" in result.output
        assert ex.run(CodeBlock("python", "print(len(bytearray(64 * 1024 * 1024)))")).output == "67108864\n"


@pytest.mark.parametrize("mode", MODES)
def test_process_limit_contains_a_fork_bomb(tmp_path, mode):
    _need_cgroups()
    code = (
        "import os, time\nmade = 0\n"
        "for _ in range(200):\n"
        "    try:\n        pid = os.fork()\n    except OSError as exc:\n"
        "        print('refused after', made, exc.errno, flush=True)\n        break\n"
        "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n"
        "    made += 1\n"
    )
    with _make(tmp_path, mode, limits=Limits(timeout_s=20, max_processes=20)) as ex:
        result = ex.run(CodeBlock("python", code))
        assert result.output.startswith("refused after"), result.output
        made = int(result.output.split()[2])
        assert made == 19  # the block's own process counts
        assert ex.run(CodeBlock("python", "print('next')")).output == "next\n"


@pytest.mark.parametrize("mode", MODES)
def test_cpu_quota_throttles(tmp_path, mode):
    _need_cgroups()
    code = (
        "import time\nstart, cpu = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - start < 1.0:\n    pass\n"
        "print(round((time.process_time() - cpu) / (time.monotonic() - start), 2))"
    )
    with _make(tmp_path, mode, limits=Limits(timeout_s=20, cpus=0.2)) as ex:
        share = float(ex.run(CodeBlock("python", code)).output)
    assert share < 0.5  # unthrottled, a busy loop gets ~1.0


@pytest.mark.parametrize("mode", MODES)
def test_rlimits(tmp_path, mode):
    code = (
        "import resource\n"
        "print(*(resource.getrlimit(getattr(resource, 'RLIMIT_' + n)) for n in ('NOFILE', 'FSIZE', 'CORE')))\n"
        "try:\n    open('big', 'wb').write(b'x' * (3 * 1024 * 1024))\nexcept OSError as exc:\n"
        "    print('write refused', exc.errno)\n"
    )
    with _make(tmp_path, mode, file_size_mb=2, max_open_files=64) as ex:
        result = ex.run(CodeBlock("python", code))
    assert result.output == f"(64, 64) {(2 << 20, 2 << 20)} (0, 0)\nwrite refused 27\n"


@pytest.mark.parametrize("mode", MODES)
def test_seccomp_denies_namespaces_ptrace_mount(tmp_path, mode):
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "def err(r):\n    return ctypes.get_errno() if r != 0 else 0\n"
        "print(err(libc.unshare(0x10000000)), err(libc.ptrace(0, 0, 0, 0)),\n"
        "      err(libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)))\n"
        "import threading, subprocess\nt = threading.Thread(target=print, args=('thread',)); t.start(); t.join()\n"
        "print(subprocess.run(['echo', 'child'], capture_output=True, text=True).stdout.strip())"
    )
    with _make(tmp_path, mode) as ex:
        result = ex.run(CodeBlock("python", code))
    assert result.output == "1 1 1\nthread\nchild\n"  # EPERM x3; threads and subprocesses still work


def test_capabilities_say_what_is_enforced(tmp_path):
    ex = SandboxExecutor(workspace=tmp_path / "ws")
    enforced = ex.capabilities.enforced
    assert {"timeout_s", "memory_mb", "network", "max_output_bytes"} <= enforced
    if cgroup_support()[0] is not None:
        assert {"max_processes", "cpus"} <= enforced
    ex.close()


# Loads a filter (hex in argv[1]) into this process, then tries each socket family and the host's IPC.
LOAD_AND_TRY = r"""
import ctypes, errno, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
class Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
program = bytes.fromhex(sys.argv[1])
buf = ctypes.create_string_buffer(program)
prog = Fprog(len(program) // 8, ctypes.addressof(buf))
assert libc.prctl(38, 1, 0, 0, 0) == 0                      # PR_SET_NO_NEW_PRIVS
assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0     # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
def attempt(label, make):
    try:
        make().close()
        print(label, "ok")
    except OSError as exc:
        print(label, errno.errorcode.get(exc.errno, exc.errno))
for name in ("AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK", "AF_PACKET", "AF_VSOCK"):
    attempt(name, lambda: socket.socket(getattr(socket, name), socket.SOCK_DGRAM))
for kind in ("SOCK_STREAM", "SOCK_SEQPACKET"):
    attempt("AF_UNIX-" + kind, lambda: socket.socket(socket.AF_UNIX, getattr(socket, kind) | socket.SOCK_CLOEXEC))
a, b = socket.socketpair()
print("socketpair ok")
shm, queue = libc.shmget(0, 4096, 0o1600), libc.msgget(0, 0o1600)  # IPC_PRIVATE: removed below
print("shmget", shm >= 0, errno.errorcode.get(ctypes.get_errno()))
print("msgget", queue >= 0, errno.errorcode.get(ctypes.get_errno()))
mq_open = 240 if os.uname().machine == "x86_64" else 180
print("mq_open", libc.syscall(mq_open, b"execbox-test", 0o100 | 2, 0o600, None) >= 0)  # O_CREAT | O_RDWR
libc.shmctl(shm, 0, None), libc.msgctl(queue, 0, None), libc.mq_unlink(b"/execbox-test")  # IPC_RMID
"""


def test_seccomp_can_keep_sockets_to_unix_and_refuse_the_hosts_ipc(tmp_path):
    """The Landlock tier's filter: no namespace of its own, so only AF_UNIX
    datagram sockets and socketpair, and no SysV IPC or POSIX message queues."""
    import subprocess
    import sys

    from execbox.jail._seccomp import HOST_IPC, filter_program, supported

    require("seccomp", supported(), "x86_64 or aarch64")
    program = filter_program(unix_sockets_only=True, no_unix_streams=True, also_denied=HOST_IPC).hex()
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_TRY, program], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert seen["AF_UNIX"] == "ok" and seen["socketpair"] == "ok", done.stdout
    for family in (
        "AF_INET",
        "AF_INET6",
        "AF_NETLINK",
        "AF_PACKET",
        "AF_VSOCK",
        "AF_UNIX-SOCK_STREAM",
        "AF_UNIX-SOCK_SEQPACKET",
    ):
        assert seen[family] == "EPERM", done.stdout
    assert seen["shmget"] == "False EPERM" and seen["msgget"] == "False EPERM", done.stdout
    assert seen["mq_open"] == "False", done.stdout
    # the default filter keeps every family (the namespaces tier has a network namespace of its own)
    done = subprocess.run(
        [sys.executable, "-c", LOAD_AND_TRY, filter_program().hex()],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "AF_INET ok" in done.stdout and "AF_UNIX-SOCK_STREAM ok" in done.stdout, done.stdout + done.stderr
    assert "shmget True" in done.stdout, done.stdout
