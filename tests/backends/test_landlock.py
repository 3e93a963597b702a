"""The sandbox's Landlock tier (no namespaces), with real Landlock and real
processes: what it confines, what it bounds, how "auto" picks it, and the
fallback when bubblewrap cannot make a namespace (a real cause: a user
namespace whose max_user_namespaces is 0)."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import uuid
from pathlib import Path

import pytest

from execbox import BackendUnavailableError, CodeBlock, ConfigurationError, Limits, SandboxExecutor
from execbox.backends.sandbox._landlock_tier import landlock_problem
from execbox.jail import _landlock
from execbox.jail._cgroups import cgroup_support
from execbox.jail._jail import find_bwrap
from tests.conftest import marked, require, wait_dead

SRC = str(Path(__file__).resolve().parents[2] / "src")
CHECKOUT = str(Path(__file__).resolve().parents[2])
LIMITS = Limits(timeout_s=10, memory_mb=256, max_processes=40)
ROOT = os.geteuid() == 0


@pytest.fixture(autouse=True)
def _landlock_present():
    problem = landlock_problem()
    require("Landlock", problem is None, problem or "")


@pytest.fixture
def open_folder():
    """A folder outside the workspace that every uid may read: only Landlock keeps a block out."""
    folder = tempfile.mkdtemp(prefix="execbox-landlock-test-", dir="/tmp")
    os.chmod(folder, 0o755)
    yield Path(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _executor(tmp_path: Path, limits: Limits = LIMITS, **options) -> SandboxExecutor:
    return SandboxExecutor(workspace=tmp_path / "ws", limits=limits, isolation="landlock", **options)


def _run(executor: SandboxExecutor, code: str, language: str = "python"):
    return executor.run(CodeBlock(language, code))


@pytest.mark.filterwarnings("ignore::execbox.WeakerIsolationWarning")
class TestConfinement:
    def test_files_outside_the_allowed_paths_are_neither_read_nor_written(self, tmp_path, open_folder):
        token = secrets.token_hex(16)
        secret = open_folder / "secret.txt"
        secret.write_text(token)
        os.chmod(secret, 0o666)  # DAC would let any uid read and write it: Landlock must not
        home = os.path.expanduser("~")
        code = textwrap.dedent(f"""
            import os
            def attempt(label, action):
                try:
                    action()
                    print(label, "DONE")
                except OSError as exc:
                    print(label, "refused", exc.errno)
            attempt("read-secret", lambda: print(open({str(secret)!r}).read()))
            attempt("write-secret", lambda: open({str(secret)!r}, "a").write("pwned"))
            attempt("new-file-beside", lambda: open({str(open_folder / "new.txt")!r}, "w").write("x"))
            attempt("list-home", lambda: print(os.listdir({home!r})))
            attempt("read-bashrc", lambda: print(open({home + "/.bashrc"!r}).read()))
            attempt("write-home", lambda: open({home + "/execbox-pwned"!r}, "w").write("x"))
            attempt("write-host-tmp", lambda: open("/tmp/execbox-pwned-{token[:8]}", "w").write("x"))
            attempt("write-usr", lambda: open("/usr/execbox-pwned", "w").write("x"))
            open("in-workspace.txt", "w").write("mine")
            os.makedirs("sub/dir", exist_ok=True)
            os.rename("in-workspace.txt", "sub/dir/moved.txt")
            open(os.path.join(os.environ["TMPDIR"], "scratch"), "w").write("tmp")
            print("workspace ok")
        """)
        with _executor(tmp_path) as ex:
            result = _run(ex, code)
        assert "workspace ok" in result.output, result.output
        assert "DONE" not in result.output, result.output
        assert token not in result.output
        assert secret.read_text() == token
        assert not (open_folder / "new.txt").exists()
        assert not os.path.exists(f"/tmp/execbox-pwned-{token[:8]}")
        assert (tmp_path / "ws" / "sub" / "dir" / "moved.txt").read_text() == "mine"

    def test_system_python_runs_and_imports(self, tmp_path):
        from execbox.jail._acl import mount_namespaces

        # multiprocessing's semaphores need the block's own /dev/shm: a mount namespace, as root
        why = "root without CAP_SYS_ADMIN (a container's default) makes no mount namespace: no /dev/shm"
        require("a mount namespace for /dev/shm", not ROOT or mount_namespaces(), why)
        code = textwrap.dedent("""
            import json, sqlite3, ssl, decimal, subprocess, multiprocessing
            def square(x):
                return x * x
            if __name__ == "__main__":
                with multiprocessing.Pool(2) as pool:  # POSIX semaphores in /dev/shm
                    print(pool.map(square, range(5)))
                print(subprocess.run(["sh", "-c", "echo from-sh"], capture_output=True, text=True).stdout.strip())
                print(sqlite3.connect(":memory:").execute("select 6*7").fetchone()[0])
        """)
        with _executor(tmp_path) as ex:
            assert ex.isolation_in_use == "landlock"
            result = _run(ex, code)
        assert result.exit_code == 0, result.output
        assert result.output == "[0, 1, 4, 9, 16]\nfrom-sh\n42\n"

    def test_the_environment_is_cleared_and_the_temporary_folder_is_the_blocks(self, tmp_path, monkeypatch):
        token = secrets.token_hex(16)
        monkeypatch.setenv("EXECBOX_TEST_SECRET", token)
        code = (
            "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())\n"
            "print('cwd', os.getcwd())\nprint('tmp', os.environ['TMPDIR'], os.environ['HOME'])"
        )
        with _executor(tmp_path) as ex:
            first = _run(ex, code)
            second = _run(ex, code)
        assert first.exit_code == 0, first.output
        assert token not in first.output and "EXECBOX_TEST_SECRET" not in first.output
        assert f"cwd {tmp_path / 'ws'}" in first.output
        tmp_line = next(line for line in first.output.splitlines() if line.startswith("tmp "))
        _, tmpdir, home = tmp_line.split()
        assert tmpdir == home and tmpdir != "/tmp"
        assert not os.path.exists(tmpdir), "the block's temporary folder outlived it"
        assert tmp_line not in second.output, "two blocks shared a temporary folder"

    def test_the_network_is_off_and_on_is_refused(self, tmp_path):
        server = socket.create_server(("127.0.0.1", 0))
        server.settimeout(0.5)
        port = server.getsockname()[1]
        code = (
            f"import socket\ntry:\n    s = socket.create_connection(('127.0.0.1', {port}), timeout=3)\n"
            "    print('CONNECTED', s.recv(5))\nexcept OSError as exc:\n    print('refused', exc.errno)\n"
        )
        try:
            with _executor(tmp_path) as ex:
                off = _run(ex, code)
            assert "refused 1" in off.output, off.output  # EPERM: socket() itself
            # on would be the host's network (this server on loopback among it): this tier refuses it
            with pytest.raises(BackendUnavailableError, match=r"network=True\) needs the namespaces tier"):
                _executor(tmp_path, LIMITS.replace(network=True)).start()
            with pytest.raises(TimeoutError):
                server.accept()
        finally:
            server.close()

    @pytest.mark.parametrize("network", [False], ids=["network-off"])  # on: refused in this tier
    def test_a_host_unix_socket_the_uid_may_open_is_not_reached(self, tmp_path, open_folder, network):
        # Landlock does not mediate connect(): a socket the block's uid may write (a session D-Bus, the
        # Docker socket for a docker-group member) is kept out by refusing unix stream sockets
        server = socket.socket(socket.AF_UNIX)
        path = str(open_folder / "host.sock")
        server.bind(path)
        os.chmod(path, 0o777)
        server.listen(1)
        server.settimeout(1)
        code = textwrap.dedent(f"""
            import socket
            for kind in ("SOCK_STREAM", "SOCK_SEQPACKET"):
                try:
                    s = socket.socket(socket.AF_UNIX, getattr(socket, kind))
                    s.connect({path!r})
                    print("CONNECTED", kind)
                except OSError as exc:
                    print("refused", kind, exc.errno)
            a, b = socket.socketpair()
            a.sendall(b"pair")
            print("socketpair", b.recv(4))
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close()
            print("datagram ok")
        """)
        try:
            with _executor(tmp_path, LIMITS.replace(network=network)) as ex:
                result = _run(ex, code)
            with pytest.raises(OSError):
                server.accept()
        finally:
            server.close()
        assert result.output == (
            "refused SOCK_STREAM 1\nrefused SOCK_SEQPACKET 1\nsocketpair b'pair'\ndatagram ok\n"
        ), result.output

    def test_a_host_process_of_the_same_uid_cannot_be_signalled(self, tmp_path):
        if _landlock.abi() < 6:
            pytest.skip(
                f"Landlock ABI {_landlock.abi()} < 6 has no signal scoping: a block may signal the "
                "processes of its own uid (the tier's documented gap)"
            )
        with _executor(tmp_path) as ex:
            uid = int(_run(ex, "import os; print(os.getuid())").output)
            # as root the block's uid is the executor's jail id: the sleeper runs as that id too
            sleeper = subprocess.Popen(["sleep", "30"], **({"user": uid, "group": uid} if ROOT else {}))
            try:
                code = (
                    f"import os, signal\nfor sig in (0, signal.SIGTERM):\n    try:\n"
                    f"        os.kill({sleeper.pid}, sig)\n        print('SIGNALLED', sig)\n"
                    "    except OSError as exc:\n        print('refused', exc.errno)\n"
                )
                result = _run(ex, code)
            finally:
                sleeper.kill()
                status = sleeper.wait()
        assert result.output == "refused 1\nrefused 1\n", result.output
        assert status != -signal.SIGTERM


@pytest.mark.filterwarnings("ignore::execbox.WeakerIsolationWarning")
class TestLimits:
    FORK = (
        "import os, time\nmade = 0\nfor _ in range(300):\n    try:\n        pid = os.fork()\n"
        "    except OSError as exc:\n        print('refused after', made, exc.errno, flush=True)\n        break\n"
        "    if pid == 0:\n        time.sleep(30)\n        os._exit(0)\n    made += 1\n"
    )

    @pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "rlimit-only"])
    def test_a_fork_bomb_is_bounded_and_the_next_block_runs(self, tmp_path, cgroups):
        if not ROOT:
            pytest.skip(
                "as a user who is not root RLIMIT_NPROC counts every process of the user "
                "(the tier's documented gap): the bound is not the block's own"
            )
        with _executor(tmp_path, LIMITS.replace(max_processes=20), cgroups=cgroups) as ex:
            result = _run(ex, self.FORK)
            assert result.output.startswith("refused after"), result.output
            made = int(result.output.split()[2])
            assert made <= 19, result.output  # the block's own process counts
            assert made >= 15, result.output  # the count is the executor's own: nothing else of its id runs
            assert _run(ex, "print('next')").output == "next\n"

    @pytest.mark.parametrize("env", ["inherited", "cleared"])
    @pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "rlimit-only"])
    def test_a_setsid_daemon_dies_at_the_timeout(self, tmp_path, cgroups, env):
        if env == "cleared" and not ROOT and not (cgroups and cgroup_support()[0] is not None):
            pytest.skip(
                "as a user who is not root without a cgroup, a daemon that clears its environment (its "
                "run token) and leaves the session outlives the block (the tier's documented gap)"
            )
        marker = f"execbox-landlock-{uuid.uuid4().hex}"
        code = textwrap.dedent(f"""
            import os, sys, time
            if os.fork() == 0:
                os.setsid()
                if os.fork() != 0:
                    os._exit(0)
                os.execve(sys.executable, [sys.executable, "-c", "import time\\nwhile True: time.sleep(1)",
                                           {marker!r}], {"dict(os.environ)" if env == "inherited" else "{}"})
            time.sleep(0.5)
            print("daemon started", flush=True)
            time.sleep(60)
        """)
        with _executor(tmp_path, LIMITS.replace(timeout_s=3), cgroups=cgroups) as ex:
            result = _run(ex, code)
            assert result.timed_out and "daemon started" in result.output, result.output
            assert wait_dead(marked(marker)) == []
            assert _run(ex, "print('next')").output == "next\n"

    @pytest.mark.parametrize("cgroups", [True, False], ids=["cgroups", "rlimit-only"])
    def test_a_memory_bomb_is_stopped_at_the_limit(self, tmp_path, cgroups):
        code = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))\n"
        with _executor(tmp_path, LIMITS.replace(memory_mb=128), cgroups=cgroups) as ex:
            result = _run(ex, code)
            assert result.exit_code != 0 and not result.timed_out, result.output
            assert result.error is not None and result.error.name == "MemoryLimit", result.output
            assert "memory limit 128 MB" in result.output
            assert _run(ex, "print(len(bytearray(32 << 20)))").output == f"{32 << 20}\n"


def test_isolation_is_validated_and_named():
    with pytest.raises(ConfigurationError, match="'auto', 'namespaces', 'landlock'"):
        SandboxExecutor(isolation="chroot")
    with pytest.raises(ConfigurationError, match="preload"):
        SandboxExecutor(isolation="landlock", preload=["json"])


def test_auto_picks_namespaces_where_bubblewrap_starts(tmp_path, recwarn):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with SandboxExecutor(workspace=tmp_path / "ws") as ex:
        assert ex.run(CodeBlock("python", "print(1)")).output == "1\n"
        assert ex.isolation_in_use == "namespaces"
    assert not [w for w in recwarn if "Landlock" in str(w.message)]


WARNS_ONCE = """
import sys, tempfile, warnings
warnings.simplefilter("always")
from execbox import CodeBlock, SandboxExecutor, WeakerIsolationWarning
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    for _ in range(2):
        with SandboxExecutor(workspace=tempfile.mkdtemp(), isolation="landlock") as ex:
            ex.restart()
            print(ex.run(CodeBlock("python", "print(6*7)")).output.strip())
print("warnings", sum(issubclass(w.category, WeakerIsolationWarning) for w in seen))
print([str(w.message) for w in seen if issubclass(w.category, WeakerIsolationWarning)])
"""


def test_the_landlock_tier_warns_once():
    done = subprocess.run(
        [sys.executable, "-c", WARNS_ONCE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": SRC},
        cwd=CHECKOUT,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:2] == ["42", "42"] and lines[2] == "warnings 1", done.stdout
    assert "isolation='landlock' was asked for" in lines[3]


# Runs inside a user namespace whose max_user_namespaces is 0: bubblewrap cannot make the jail's.
FALLBACK = """
import ctypes, os, struct, sys, warnings
from execbox import BackendUnavailableError, CodeBlock, Limits, SandboxExecutor, WeakerIsolationWarning
secret, workspace, landlock = sys.argv[1:4]
if landlock == "refused":  # as a container's seccomp profile may: Landlock's calls answer ENOSYS
    nr = {"x86_64": 444, "aarch64": 444}[os.uname().machine]
    prog = [(0x20, 0, 0, 0)]
    for i in range(3):
        prog += [(0x15, 0, 1, nr + i), (0x06, 0, 0, 0x00050000 | 38)]
    prog.append((0x06, 0, 0, 0x7FFF0000))
    code = b"".join(struct.pack("=HBBI", *ins) for ins in prog)
    buf = ctypes.create_string_buffer(code)
    fprog = struct.pack("=HxxxxxxQ", len(prog), ctypes.addressof(buf))
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0
    try:
        SandboxExecutor(workspace=workspace).start()
    except BackendUnavailableError as exc:
        print("error", exc)
    raise SystemExit
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    with SandboxExecutor(workspace=workspace, limits=Limits(timeout_s=20)) as ex:
        print("tier", ex.isolation_in_use)
        code = (f"import os\\ntry:\\n    print(open({secret!r}).read())\\n"
                "except OSError as exc:\\n    print('refused', exc.errno)")
        print("block", ex.run(CodeBlock("python", code)).output.strip())
        print("uid", ex.run(CodeBlock("python", "import os; print(os.getuid())")).output.strip())
for w in seen:
    if issubclass(w.category, WeakerIsolationWarning):
        print("warned", str(w.message))
"""


# Run as root: makes a user namespace mapping host ids 0-65535 to themselves, sets its
# max_user_namespaces to 0 (a per-namespace knob), and runs FALLBACK as its root.
LAUNCHER = """
import os, sys, ctypes
libc = ctypes.CDLL(None, use_errno=True)
go_r, go_w = os.pipe()
ready_r, ready_w = os.pipe()
pid = os.fork()
if pid == 0:
    if libc.unshare(0x10000000) != 0:  # CLONE_NEWUSER
        os._exit(90)
    os.write(ready_w, b"x")
    os.read(go_r, 1)  # the parent has written the id maps
    with open("/proc/sys/user/max_user_namespaces", "w") as knob:
        knob.write("0")
    os.execv(sys.executable, [sys.executable, "-c", *sys.argv[1:]])
os.read(ready_r, 1)
for name in ("uid_map", "gid_map"):
    with open(f"/proc/{pid}/{name}", "w") as ids:
        ids.write("0 0 65536\\n")
os.write(go_w, b"x")
sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
"""


def _in_a_namespace_without_namespaces(open_folder: Path, landlock: str) -> subprocess.CompletedProcess[str]:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    if not ROOT:
        pytest.skip("needs root: the test maps host ids 0-65535 into a user namespace of its own")
    (open_folder / "secret.txt").write_text(secrets.token_hex(16))
    os.chmod(open_folder / "secret.txt", 0o644)
    return subprocess.run(
        [
            sys.executable,
            "-c",
            LAUNCHER,
            FALLBACK,
            str(open_folder / "secret.txt"),
            str(open_folder / "ws"),
            landlock,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=CHECKOUT,
        # the executor's jail ids from a range inside the mapped ones
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": SRC,
            "LANG": "C.UTF-8",
            "EXECBOX_JAIL_IDS": "50000:1000",
        },
    )


def test_auto_falls_back_to_landlock_where_bubblewrap_cannot_make_a_namespace(open_folder):
    done = _in_a_namespace_without_namespaces(open_folder, "present")
    assert done.returncode == 0, done.stdout + done.stderr
    out = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert out["tier"] == "landlock", done.stdout
    assert out["block"] == "refused 13", done.stdout
    assert 50000 <= int(out["uid"]) < 51000, done.stdout
    assert "bubblewrap could not create a sandbox" in out["warned"], out["warned"]


def test_where_neither_tier_can_run_the_error_names_both_causes_and_fixes(open_folder):
    done = _in_a_namespace_without_namespaces(open_folder, "refused")
    assert done.returncode == 0, done.stdout + done.stderr
    error = done.stdout.removeprefix("error ")
    assert error.startswith("sandbox backend unavailable: neither isolation tier can run here"), done.stdout
    for named in (
        "max_*_namespaces",
        "apparmor_restrict_unprivileged_userns",
        "the kernel has no Landlock",
        "lsm=",
        "backend='local'",
        "execbox doctor",
    ):
        assert named in error, error
