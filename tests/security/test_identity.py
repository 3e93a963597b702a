"""Who a block is on the host: it must own nothing of the host's.

As root, bwrap mapped the jail's user to host root: a block left a setuid-root
shell in the workspace, chmodded the host's /dev/full, listed root-only
folders inside the read-only binds and spent root's inotify quota. Each
attempt checks the host side, from outside the jail.
"""

from __future__ import annotations

import ctypes
import os
import secrets
import stat
import threading
import time

import pytest

from execbox import CodeBlock
from tests.conftest import marked
from tests.security.conftest import run_then_healthy

pytestmark = pytest.mark.as_user

ROOT = os.geteuid() == 0
DEVICES = ("/dev/null", "/dev/full", "/dev/zero", "/dev/random", "/dev/urandom", "/dev/tty")


def _identity(path: str) -> tuple[int, int, int]:
    st = os.stat(path)
    return st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)


@pytest.fixture(scope="module", autouse=True)
def host_devices_unchanged():
    """No attempt of this module changes the owner or mode of a host device node."""
    before = {p: _identity(p) for p in DEVICES if os.path.exists(p)}
    yield
    assert {p: _identity(p) for p in before} == before


def test_files_a_block_makes_are_not_roots(mode, hostile):
    result = run_then_healthy(hostile, "python", "open('mine', 'w').write('x')")
    assert result.exit_code == 0, result.output
    st = os.lstat(hostile.workspace.path / "mine")
    if ROOT:
        assert st.st_uid != 0 and st.st_gid != 0, "a block's file is owned by host root"
    else:  # the jail is the user itself (README: what a non-root deployment still exposes)
        assert st.st_uid == os.geteuid()


def test_a_named_blocks_folders_are_the_blocks_to_write_in(mode, hostile):
    """Having its own id must not cost a block its own folders: execbox
    makes them for a named block (as root), and hands them to the jail."""
    code = (
        "import os\nhere = os.path.dirname(os.path.abspath(__file__))\n"
        "open(os.path.join(here, 'next-to-me.txt'), 'w').write('x')\nprint('wrote')\n"
    )
    result = hostile.run(CodeBlock("python", code, filename="deep/er/named.py"))
    assert result.exit_code == 0 and result.stdout == "wrote\n", result.output
    assert (hostile.workspace.path / "deep/er/next-to-me.txt").read_text() == "x"


def test_processes_of_a_block_are_not_roots(mode, hostile):
    if mode == "docker-gvisor":
        pytest.skip(
            "not for docker-gvisor: the block's processes live in gVisor's own kernel, not in host /proc"
        )
    marker = f"1.{secrets.randbelow(10**9):09d}"  # a unique command line, about a second long
    seen: dict[int, int] = {}

    def look() -> None:
        deadline = time.monotonic() + 8
        while not seen and time.monotonic() < deadline:
            for pid in marked(marker):
                try:
                    for line in open(f"/proc/{pid}/status"):
                        if line.startswith("Uid:"):
                            seen[pid] = int(line.split()[2])  # the effective uid, as the host sees it
                except OSError:
                    continue
            time.sleep(0.05)

    watcher = threading.Thread(target=look)
    watcher.start()
    code = f"import subprocess\nsubprocess.run(['sleep', '{marker}'])"
    result = run_then_healthy(hostile, "python", code)
    watcher.join()
    assert result.exit_code == 0, result.output
    assert seen, "the block's process was not found on the host"
    if ROOT:
        assert 0 not in seen.values(), f"the block ran as host root: {seen}"
    else:
        assert set(seen.values()) == {os.geteuid()}


def test_no_setuid_program_is_left_in_the_workspace(mode, hostile):
    code = """
import os, shutil
shutil.copy('/bin/sh', 'rootsh')
for bits in (0o4755, 0o2755, 0o6755):
    try:
        os.chmod('rootsh', bits)
    except OSError as exc:
        print('chmod', oct(bits), exc.strerror)
try:
    os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o4755))
except OSError as exc:
    print('open', exc.strerror)
os.chmod('.', 0o755)
"""
    result = run_then_healthy(hostile, "python", code)
    for name in ("rootsh", "created"):
        path = hostile.workspace.path / name
        if not path.exists():
            continue
        st = os.lstat(path)
        assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID), f"{name} kept a set-id bit: {oct(st.st_mode)}"
        if ROOT:
            assert st.st_uid != 0, f"{name} is owned by host root"
    assert (hostile.workspace.path / "rootsh").exists(), result.output


def test_host_device_nodes_cannot_be_changed(mode, hostile):
    code = """
import os
for path in ('/dev/null', '/dev/full', '/dev/zero'):
    for change in (lambda: os.chmod(path, 0), lambda: os.chown(path, 0, 0)):
        try:
            change()
            print('changed', path)
        except OSError as exc:
            print('refused', path, exc.strerror)
"""
    result = run_then_healthy(hostile, "python", code)
    # the container's /dev is its own, so a change there would not be the host's;
    # the module's fixture checks the host's nodes whatever the block printed
    if mode in ("pool", "oneshot", "stateful", "jupyter"):
        assert "changed" not in result.output, result.output


def test_root_only_folders_in_the_binds_are_unreadable(mode, hostile):
    private = "/etc/ssl/private"
    if not os.path.isdir(private) or stat.S_IMODE(os.stat(private).st_mode) & 0o005:
        pytest.skip(f"{private} is not a root-only folder on this host")
    result = run_then_healthy(hostile, "python", f"import os\nprint(os.listdir({private!r}))")
    assert result.exit_code != 0, result.output
    assert result.error is not None and result.error.name in ("PermissionError", "FileNotFoundError"), (
        result.output
    )


def test_a_block_cannot_spend_the_hosts_inotify_quota(mode, hostile):
    if not ROOT and mode != "docker-gvisor":
        pytest.skip(
            "as a non-root user the jail (and a runc container's user) is that user, and shares its "
            "quotas (README, security model)"
        )
    libc = ctypes.CDLL(None, use_errno=True)
    verdict: dict[str, int] = {}
    held = threading.Event()

    def on_output(stream: str, text: str) -> None:
        if "held" in text and not held.is_set():
            fd = libc.inotify_init1(0)
            verdict["host"] = fd if fd >= 0 else -ctypes.get_errno()
            if fd >= 0:
                os.close(fd)
            held.set()

    code = """
import ctypes, time
libc = ctypes.CDLL(None)
fds = []
while len(fds) < 1024:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print('held', len(fds), flush=True)
time.sleep(3)
"""
    result = hostile.run(CodeBlock("python", code), on_output=on_output)
    assert held.is_set(), result.output
    assert verdict["host"] >= 0, f"the host's inotify_init1 failed while a block held {result.output.strip()}"
