"""The host's shared folders, /tmp and /dev/shm: a block must neither learn
the names of the host's files there nor open them, even by a name it knows.

Seen before: in the Landlock tier, where listing /dev/shm was refused, an
inotify watch on it (Landlock does not mediate inotify; the folder's mode
lets every uid read it) named the file a host process made there; as a user
who is not root, the block then read and overwrote it (the tier granted
files in the host's /dev/shm, for POSIX semaphores). As root the watch
named the host's files in /tmp and /dev/shm the same way.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import pytest

from execbox import CodeBlock
from tests.security.conftest import MODES, not_for, run_then_healthy
from tests.security.test_host_side import run_in_thread

pytestmark = pytest.mark.as_user

FOLDERS = ("/tmp", "/dev/shm")

WATCH = r"""
import ctypes, os, struct, time
libc = ctypes.CDLL(None, use_errno=True)
IN_ALL_EVENTS = 0xfff
fd = libc.inotify_init1(os.O_NONBLOCK)
print('inotify', fd, ctypes.get_errno())
for folder in {folders!r}:
    wd = libc.inotify_add_watch(fd, folder.encode(), IN_ALL_EVENTS) if fd >= 0 else -1
    print('watch', folder, wd, ctypes.get_errno())
open('ready', 'w').close()
names, deadline, last = set(), time.monotonic() + 20, False
while fd >= 0 and time.monotonic() < deadline and not last:
    last = os.path.exists('made')  # the host has made its files: one more read
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        time.sleep(0.02)
        continue
    pos = 0
    while pos < len(data):
        _, _, _, length = struct.unpack_from('iIII', data, pos)
        name = data[pos + 16:pos + 16 + length].rstrip(b'\0').decode(errors='replace')
        pos += 16 + length
        if name.startswith('execbox-'):
            names.add(name)
print('seen', sorted(names))
for folder in {folders!r}:
    for name in sorted(names):
        path = os.path.join(folder, name)
        try:
            with open(path, 'r+') as handle:
                print('read', path, handle.read())
                handle.seek(0)
                handle.write('pwned')
        except OSError as exc:
            print('refused', path, exc.errno)
"""


def test_a_watch_on_a_shared_folder_names_no_host_file(hostile):
    token = secrets.token_hex(8)
    ready = hostile.workspace.path / "ready"
    thread, done = run_in_thread(hostile, CodeBlock("python", WATCH.format(folders=FOLDERS)))
    made: list[Path] = []
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ready.exists(), f"the block did not start watching: {done}"
        for folder in FOLDERS:  # a host process makes a file of its own, closed to other users
            path = Path(folder) / f"execbox-made-{token}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, f"host-secret-{token}\n".encode())
            os.close(fd)
            made.append(path)
        (hostile.workspace.path / "made").touch()
        thread.join(60)
        assert done, "run() did not return"
        if isinstance(done[0], BaseException):
            raise done[0]
        result = done[0]
        assert token not in result.output, f"the block learned a host file's name:\n{result.output}"
        assert "seen []" in result.stdout, result.output
        for path in made:
            assert path.read_text() == f"host-secret-{token}\n", f"{path} was changed"
    finally:
        for path in made:
            path.unlink(missing_ok=True)
    after = hostile.run(CodeBlock("python", "print(6*7)"))
    assert after.output == "42\n", after.output


KNOWN = r"""
import os
for path in ({host!r}, ):
    try:
        with open(path, 'r+') as handle:
            print('read', handle.read())
            handle.seek(0)
            handle.write('pwned')
    except OSError as exc:
        print('refused', exc.errno)
    try:
        os.unlink(path)
        print('removed')
    except OSError as exc:
        print('not removed', exc.errno)
try:
    with open({mine!r}, 'w') as handle:
        handle.write('left by the block')
    print('made its own', sorted(n for n in os.listdir({folder!r}) if n.startswith('execbox-')))
except OSError as exc:
    print('cannot make its own', exc.errno)
"""


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_host_file_in_a_shared_folder_is_out_of_reach_by_name(hostile, folder):
    token = secrets.token_hex(8)
    host = Path(folder) / f"execbox-known-{token}"
    mine = Path(folder) / f"execbox-block-{token}"
    fd = os.open(host, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        os.fchmod(fd, 0o666)  # its mode lets every uid read and write it: only the sandbox keeps a block out
        os.write(fd, f"host-secret-{token}\n".encode())
        os.close(fd)
        code = KNOWN.format(host=str(host), mine=str(mine), folder=folder)
        result = run_then_healthy(hostile, "python", code)
        assert result.exit_code == 0, result.output
        assert f"host-secret-{token}" not in result.output, result.output
        assert "removed" not in result.stdout.replace("not removed", ""), result.output
        assert host.read_text() == f"host-secret-{token}\n", f"{host} was changed"
        assert not mine.exists(), f"the block's {mine} is in the host's {folder}"
        assert f"execbox-known-{token}" not in result.output, result.output
    finally:
        host.unlink(missing_ok=True)
        mine.unlink(missing_ok=True)


OWN_SHM = r"""
import errno, os
try:
    print('listed', sorted(os.listdir('/dev/shm')))
except OSError as exc:
    print('not listed', errno.errorcode[exc.errno])
open('source', 'w').close()
for kind, make in (
    ('fifo', os.mkfifo),
    ('symlink', lambda path: os.symlink('/etc/hostname', path)),
    ('link', lambda path: os.link('source', path)),
    ('folder', os.mkdir),
):
    try:
        make('/dev/shm/execbox-{token}-' + kind)
        print('made', kind)
    except OSError as exc:
        print('refused', kind, errno.errorcode[exc.errno])
try:
    import multiprocessing, multiprocessing.shared_memory
    lock = multiprocessing.Lock()  # a POSIX semaphore: sem_open links its file to its name
    memory = multiprocessing.shared_memory.SharedMemory(create=True, size=64)
    memory.buf[:5] = b'hello'
    print('shared memory', bytes(memory.buf[:5]).decode())
    memory.close()
    memory.unlink()
except OSError as exc:
    print('no shared memory', errno.errorcode[exc.errno])
"""


def test_the_landlock_tier_shows_a_block_no_host_dev_shm(mode, hostile):
    """Issue 39: a block of the Landlock tier listed /dev/shm and made FIFOs,
    symbolic links and links there. It sees either a /dev/shm of its own (as
    root, in a mount namespace: POSIX shared memory and semaphores work in
    it, nothing else is made there) or none (as a user who is not root: they
    fail with EACCES); never the host's files, and nothing lands in the host's."""
    not_for(mode, set(MODES) - {"landlock"}, "the namespaces and Docker give a block a /dev/shm of its own")
    token = secrets.token_hex(8)
    marker = Path("/dev/shm") / f"execbox-marker-{token}"
    marker.write_text(f"host-{token}\n")
    try:
        result = run_then_healthy(hostile, "python", OWN_SHM.replace("{token}", token))
        assert result.exit_code == 0, result.output
        assert marker.name not in result.output, f"the block listed the host's /dev/shm:\n{result.output}"
        assert "made " not in result.stdout, result.output
        for kind in ("fifo", "symlink", "link", "folder"):
            assert f"refused {kind} " in result.stdout, result.output
        assert "shared memory hello" in result.stdout or "no shared memory EACCES" in result.stdout, (
            result.output
        )
        assert marker.read_text() == f"host-{token}\n"
        left = sorted(p.name for p in Path("/dev/shm").iterdir() if token in p.name and p != marker)
        assert left == [], f"the block made {left} in the host's /dev/shm"
    finally:
        for path in Path("/dev/shm").iterdir():
            if token in path.name:
                path.rmdir() if path.is_dir() and not path.is_symlink() else path.unlink()
