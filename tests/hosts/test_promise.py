"""The sandbox's promise, on whatever host this runs: isolated by default,
with limits. Run as root and as a user who is not root (``as_user``), on
the cgroup v1 host and in the cgroup v2 VM (tests/test_cgroup2_vm.py), in a
container with the engine's defaults as a service is deployed
(tests/security/test_container_host.py), for each isolation tier the host
has. ``pool`` is the executor as built with no options: where bubblewrap is
missing it runs blocks in the Landlock tier.

Seen before: for a user who is not root, ``max_processes=40`` let a block
fork 300 processes and a block over ``memory_mb`` got a bare MemoryError.
Each test checks from outside the sandbox, then runs an ordinary block on the
same executor.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from execbox import CodeBlock, Executor, Limits, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from execbox.backends.sandbox._landlock_tier import landlock_problem
from tests.conftest import marked, require

pytestmark = [pytest.mark.as_user, pytest.mark.filterwarnings("ignore::execbox.WeakerIsolationWarning")]

MODES = {
    "pool": {},  # the default executor
    "oneshot": {"pool": False},
    "landlock": {"isolation": "landlock"},  # the tier without namespaces (Ubuntu 24.04, containers)
}
LIMITS = Limits(timeout_s=15, memory_mb=128, max_processes=40)


@pytest.fixture(params=sorted(MODES))
def make(request, tmp_path) -> Iterator:
    if request.param == "landlock" or (request.param == "pool" and find_bwrap() is None):
        problem = landlock_problem()
        require("Landlock", problem is None, problem or "")
    else:
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    made: list[Executor] = []

    def build(limits: Limits = LIMITS) -> Executor:
        executor = SandboxExecutor(
            workspace=Workspace(tmp_path / f"ws{len(made)}"), limits=limits, **MODES[request.param]
        )
        made.append(executor)
        executor.start()
        return executor

    if (request.param == "landlock" or find_bwrap() is None) and os.geteuid() != 0:
        left = _zombies_reaped()
        require(
            "a PID 1 that reaps orphans",
            not left,
            f"{len(left)} zombies of this user outlived their wait: PID 1 here ({_init()}) does not reap "
            "them, and without a user namespace RLIMIT_NPROC (Limits.max_processes) counts every process "
            "of the user, zombies too (README's security model: run containers with --init)",
        )
    yield build
    for executor in made:
        executor.close()


# Zombies of this user that outlived a whole wait: PID 1 does not reap (a container without --init)
_unreaped: set[int] = set()


def _zombies_reaped(timeout_s: float = 10) -> set[int]:
    """Without a user namespace, RLIMIT_NPROC counts every process of the
    user, zombies too: killed processes of an earlier test count until the
    host's PID 1 reaps them (this machine's takes about a second; a container
    without --init, never: README's security model says so). Waits for
    them; returns those left (at once when one outlived an earlier wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        zombies: set[int] = set()
        for name in os.listdir("/proc"):
            try:
                mine = name.isdigit() and os.stat(f"/proc/{name}").st_uid == os.geteuid()
                if mine and Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                    zombies.add(int(name))
            except OSError:
                continue
        if not zombies or zombies & _unreaped:
            return zombies
        if time.monotonic() >= deadline:
            _unreaped.update(zombies)
            return zombies
        time.sleep(0.1)


def _init() -> str:
    try:
        return Path("/proc/1/comm").read_text().strip() or "?"
    except OSError:
        return "?"


def healthy(executor: Executor) -> None:
    result = executor.run(CodeBlock("python", "print(6*7)"))
    assert result.output == "42\n", f"the executor did not survive:\n{result.output}"


FORK_BOMB = """
import os, time
made = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            time.sleep(2)
            os._exit(0)
        made += 1
except OSError as exc:
    print('refused', exc.errno)
print('made', made)
"""


def test_a_fork_bomb_is_bounded_by_max_processes(make):
    executor = make()
    assert "max_processes" in executor.capabilities.enforced, executor.capabilities.gaps
    result = executor.run(CodeBlock("python", FORK_BOMB))
    made = int(result.stdout.split("made ")[-1].split()[0])
    assert made < LIMITS.max_processes, result.output
    assert "refused" in result.stdout, result.output
    healthy(executor)


def test_a_memory_bomb_is_reported_naming_the_limit(make):
    executor = make()
    result = executor.run(CodeBlock("python", "x = bytearray(600 * 1024 * 1024)\nprint('allocated')"))
    assert "allocated" not in result.stdout, result.output
    assert result.error is not None and result.error.name == "MemoryLimit", result.output
    assert "Limits.memory_mb" in result.output and "128 MB" in result.output, result.output
    healthy(executor)


DAEMON = """
import os, subprocess, time
subprocess.Popen(['setsid', 'sleep', '{marker}'], start_new_session=True,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print('started', flush=True)
{then}
"""


@pytest.mark.parametrize("ending", ["returns", "times-out"])
def test_a_setsid_daemon_dies_with_its_block(make, ending):
    # a short timeout to wait out (yet long enough to start the daemon on a busy machine: 4 s was
    # not, beside pytest-xdist's workers); a long one for the block that returns (the VM under load)
    executor = make(LIMITS.replace(timeout_s=8 if ending == "times-out" else 60))
    marker = f"7{secrets.randbelow(10**8):08d}"  # a sleep of years: only a kill ends it
    then = "time.sleep(60)" if ending == "times-out" else "time.sleep(0.5)"
    result = executor.run(CodeBlock("python", DAEMON.format(marker=marker, then=then)))
    assert "started" in result.stdout, result.output
    assert result.timed_out == (ending == "times-out"), result.output
    deadline = time.monotonic() + 5
    while marked(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not marked(marker), f"the daemon outlived its block: pids {marked(marker)}"
    healthy(executor)


@contextlib.contextmanager
def loopback_server(token: str) -> Iterator[int]:
    """A TCP server on 127.0.0.1 that hands ``token`` to whoever connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(token.encode())

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join(2)
        server.close()


@pytest.fixture
def planted_in_home() -> Iterator[tuple[Path, str]]:
    """A secret in ``~/.ssh`` of whoever runs the tests (removed after,
    and ``~/.ssh`` too when it was made for it). One test at a time holds
    it, across pytest-xdist's workers: two made and removed the same
    ``~/.ssh`` at once."""
    ssh = Path.home() / ".ssh"
    with open(Path(tempfile.gettempdir()) / f"execbox-tests-home-{os.getuid()}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        existed = ssh.exists()
        ssh.mkdir(mode=0o700, exist_ok=True)
        token = f"execbox-secret-{secrets.token_hex(16)}"
        path = ssh / f"execbox-promise-{secrets.token_hex(4)}"
        path.write_text(token)
        try:
            yield path, token
        finally:
            path.unlink()
            if not existed:
                ssh.rmdir()


PEEK = """
import os, socket
print('env', [k for k, v in os.environ.items() if {token!r} in v])
for path in ({ssh!r}, {home!r}):
    try:
        print('read', path, open(path).read() if os.path.isfile(path) else os.listdir(path))
    except OSError as exc:
        print('refused', path, exc.errno)
try:
    with socket.create_connection(('127.0.0.1', {port}), timeout=3) as conn:
        print('served', conn.recv(100))
except OSError as exc:
    print('refused server', exc.errno)
"""


def test_host_secrets_stay_out_of_reach(make, planted_in_home, monkeypatch):
    path, token = planted_in_home
    monkeypatch.setenv("EXECBOX_PROMISE_SECRET", token)  # in the executor's environment from its start
    executor = make()
    with loopback_server(token) as port:
        result = executor.run(
            CodeBlock("python", PEEK.format(token=token, ssh=str(path), home=str(Path.home()), port=port))
        )
    assert result.exit_code == 0, result.output
    assert token not in result.output, result.output
    assert "env []" in result.stdout, result.output
    assert "refused server" in result.stdout, result.output
    healthy(executor)


WRITE_OUTSIDE = """
import os
for path in {paths!r}:
    try:
        with open(path, 'w') as handle:
            handle.write('pwned')
        print('WROTE', path)
    except OSError as exc:
        print('refused', path, exc.errno)
with open('inside.txt', 'w') as handle:
    handle.write('mine')
print('workspace ok')
"""


def test_a_block_writes_only_its_workspace(make, tmp_path):
    open_folder = (
        tmp_path / "open"
    )  # beside the workspace; its mode lets every uid write: only the sandbox stops it
    open_folder.mkdir()
    os.chmod(open_folder, 0o777)
    name = f"execbox-promise-{secrets.token_hex(4)}"
    paths = [
        str(open_folder / name),
        str(Path.home() / name),
        f"/tmp/{name}",
        f"/dev/shm/{name}",
        f"/usr/{name}",
        f"/etc/{name}",
    ]
    executor = make()
    try:
        result = executor.run(CodeBlock("python", WRITE_OUTSIDE.format(paths=paths)))
        assert "workspace ok" in result.stdout, result.output
        # /tmp and /dev/shm may be the block's own (a private mount): what it writes there is not the host's
        assert not [p for p in paths[:2] + paths[4:] if f"WROTE {p}" in result.stdout], result.output
        assert not [p for p in paths if os.path.lexists(p)], result.output
        assert (executor.workspace.path / "inside.txt").read_text() == "mine"
    finally:
        for path in paths:
            if os.path.lexists(path):
                os.unlink(path)
    healthy(executor)
