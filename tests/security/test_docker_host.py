"""The Docker backend's host side, and what one block leaves for the next in
its container.

Seen before, with execbox running as root: a block replaced ``.execbox``
with a link to a host folder and killed the container's keep-alive; on the
next run the host, starting a new container, made ``matplotlib`` in the host
folder and gave it to nobody (a path-based ``makedirs`` and ``lchown``
follow a link in the middle of a path). The host's /dev/null was once found
owned by nobody: handing over ``sub/null`` after a block swapped ``sub`` for
a link to /dev is one way. And a later block in the same container read a
SysV shared memory segment and a message queue an earlier one left (/tmp
and /dev/shm were emptied, IPC objects were not).

Not covered, by design: the container's /proc/self/mountinfo shows the
engine's overlay paths under /var/lib/docker (runc; gVisor shows its own
mounts). Docker's MaskedPaths is not in the SDK's ``containers.create``,
and it would not help: it masks a path once, at start, and /proc/self is
each reader's own folder.
"""

from __future__ import annotations

import errno
import os
import secrets
from pathlib import Path

import pytest

from execbox import CodeBlock, Workspace
from execbox.backends.docker._container import hand_over
from tests.security.conftest import TIMING_OUT, not_for, run_then_healthy

pytestmark = pytest.mark.as_user

HOST_DEVICES = ("/dev/null", "/dev/full")


def _identity(path: str | os.PathLike[str]) -> tuple[int, int, int]:
    st = os.stat(path, follow_symlinks=False)
    return st.st_uid, st.st_gid, st.st_mode


@pytest.fixture(scope="module", autouse=True)
def host_devices_keep_their_owner():
    """Nothing in this module may give away the host's devices."""
    before = {path: _identity(path) for path in HOST_DEVICES}
    yield
    assert {path: _identity(path) for path in HOST_DEVICES} == before


@pytest.fixture(autouse=True)
def docker_only(mode):
    not_for(
        mode,
        {"pool", "oneshot", "stateful", "jupyter", "landlock"},
        "these attacks aim at the Docker backend: its container restart, its docker exec wrapper",
    )


def _tree(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Owner, group and mode of a folder and everything in it (links not followed)."""
    found = {".": _identity(folder)}
    for path in folder.rglob("*"):
        found[str(path.relative_to(folder))] = _identity(path)
    return found


def test_starting_a_container_leaves_the_host_devices_to_root(hostile):
    """runsc gave a container's stdio to its sandbox user: with the host's
    /dev/null as a detached container's stdin, that was /dev/null (owner
    65534, seen under gVisor). The module fixture compares before and after,
    which misses a flip that happened earlier; this says what they must be."""
    assert hostile.run(CodeBlock("python", "print('up')")).stdout == "up\n"
    for path in HOST_DEVICES:
        uid, gid, mode = _identity(path)
        assert (uid, gid, oct(mode & 0o7777)) == (0, 0, "0o666"), f"{path} is now {uid}:{gid} {oct(mode)}"


# -- links the host must not follow -------------------------------------------

# Replace (part of) execbox's own folder with a link to the host folder, then
# kill everything the block user runs in the container: its keep-alive too,
# so the container stops and the next run starts a new one.
PLANT_AND_KILL = """
import os, shutil, signal
planted = {planted!r}
if os.path.lexists(planted):
    shutil.rmtree(planted) if os.path.isdir(planted) and not os.path.islink(planted) else os.remove(planted)
os.makedirs(os.path.dirname(planted) or '.', exist_ok=True)
os.symlink({outside!r}, planted)
print('planted', flush=True)
os.kill(-1, signal.SIGKILL)
"""


@pytest.mark.parametrize(
    "planted, already",
    [(".execbox", False), (".execbox", True), (".execbox/matplotlib", False)],
    ids=["internal-folder", "internal-folder-matplotlib-there", "matplotlib-folder"],
)
def test_a_new_container_does_not_follow_a_planted_internal_link(make_hostile, tmp_path, planted, already):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("host file\n")
    if already:  # a path-based chown of .execbox/matplotlib would give it away
        (outside / "matplotlib").mkdir(mode=0o700)
    before = _tree(outside)
    hostile = make_hostile()
    first = hostile.container_id
    killed = hostile.run(CodeBlock("python", PLANT_AND_KILL.format(planted=planted, outside=str(outside))))
    # the agent that forwards the block's output dies with the rest (kill -1):
    # what the block printed last may die with it; the link shows it ran
    assert "planted" in killed.output or (hostile.workspace.path / planted).is_symlink(), killed.output
    # named, so that no code file is written under .execbox first; the death
    # is seen by the killing block or, under gVisor, by this one (a note)
    after = hostile.run(CodeBlock("python", "print(6*7)", "main.py"))
    if hostile.container_id == first:  # the agent outlived kill -1: the container ends from the host instead
        hostile._kill_container(first)
        for _ in range(2):  # the first may only learn of the death
            after = hostile.run(CodeBlock("python", "print(6*7)", "main.py"))
            if after.output.endswith("42\n"):
                break
    assert after.exit_code == 0 and after.output.endswith("42\n"), after.output
    assert hostile.container_id != first, "the keep-alive survived: the restart was not attempted"
    assert _tree(outside) == before, "the host wrote or changed owners through the planted link"
    internal = hostile.workspace.path / ".execbox"
    assert not internal.is_symlink() and not (internal / "matplotlib").is_symlink()
    assert (internal / "matplotlib").is_dir()


@pytest.mark.parametrize("target, name", [("outside", "x"), ("/dev", "null")], ids=["host-folder", "dev"])
def test_a_block_named_through_a_planted_folder_link_is_refused(hostile, tmp_path, target, name):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "x").write_text("original\n")
    os.chmod(outside / "x", 0o644)
    folder = str(outside) if target == "outside" else target
    before = _tree(outside), _identity(os.path.join(folder, name))
    planted = hostile.run(CodeBlock("python", f"import os\nos.symlink({folder!r}, 'sub')\nprint('planted')"))
    assert planted.output == "planted\n", planted.output
    result = hostile.run(CodeBlock("python", "print('ran')", f"sub/{name}"))
    assert result.error is not None and result.error.name == "PathEscape", result.output
    assert "ran" not in result.stdout
    assert (_tree(outside), _identity(os.path.join(folder, name))) == before
    assert (outside / "x").read_text() == "original\n"
    healthy = hostile.run(CodeBlock("python", "print(6*7)"))
    assert healthy.output == "42\n", healthy.output


def test_handing_over_does_not_follow_a_folder_swapped_for_a_link(tmp_path):
    # The host checks a block's filename when it writes the file, then hands
    # it over to the block user: a block running meanwhile (another thread's)
    # may swap a folder on the way for a link by then. The swap is made here
    # directly, where a race would make it.
    if os.getuid() != 0:
        pytest.skip("only root hands workspace files over (a non-root host's blocks run as itself)")
    outside = tmp_path / "outside"
    (outside / "matplotlib").mkdir(parents=True, mode=0o700)
    (outside / "x").write_text("original\n")
    workspace = Workspace(tmp_path / "ws")
    os.symlink(outside, workspace.path / "sub")
    os.symlink(outside, workspace.path / ".execbox")
    before = _tree(outside)
    hand_over(str(workspace.path), "65534:65534", ["sub/x", os.path.join(".execbox", "matplotlib")])
    assert _tree(outside) == before
    assert _identity(workspace.path)[:2] == (65534, 65534)  # the workspace itself is handed over


# -- what a block leaves in the container ------------------------------------

LEAVE = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
IPC_CREAT = 0o1000
shm = libc.shmget(KEY, 4096, IPC_CREAT | 0o600)
ctypes.memmove(libc.shmat(shm, None, 0), SECRET.encode(), len(SECRET))
class Message(ctypes.Structure):
    _fields_ = [('mtype', ctypes.c_long), ('mtext', ctypes.c_char * 64)]
queue = libc.msgget(KEY + 1, IPC_CREAT | 0o600)
sent = libc.msgsnd(queue, ctypes.byref(Message(1, SECRET.encode())), 64, 0)
sem = libc.semget(KEY + 2, 1, IPC_CREAT | 0o600)
for name in ('/dev/shm/left', '/dev/shm/.left', '/tmp/.left'):
    with open(name, 'w') as handle:
        handle.write(SECRET)
print('left', shm, queue, sent, sem, flush=True)
if STAY:
    import time
    time.sleep(60)
"""

FIND = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
for kind, found in (('shm', libc.shmget(KEY, 0, 0)), ('msg', libc.msgget(KEY + 1, 0)),
                    ('sem', libc.semget(KEY + 2, 0, 0))):
    print(kind, found, ctypes.get_errno() if found < 0 else 0)
    if kind == 'shm' and found >= 0:
        print(ctypes.string_at(libc.shmat(found, None, 0), 64))
print('files', sorted(os.listdir('/dev/shm')), sorted(os.listdir('/tmp')))
"""


@pytest.mark.parametrize("ending", ["returns", "times-out"])
def test_ipc_objects_and_scratch_files_do_not_reach_the_next_block(make_hostile, ending):
    hostile = make_hostile(TIMING_OUT)
    key, secret = secrets.randbelow(1 << 30) + 1, f"execbox-secret-{secrets.token_hex(16)}"
    header = f"KEY = {key}\nSECRET = {secret!r}\nSTAY = {ending == 'times-out'}\n"
    left = hostile.run(CodeBlock("python", header + LEAVE))
    assert left.stdout.startswith("left "), left.output
    assert "-1" not in left.stdout.split(), f"the block could not make its objects: {left.output}"
    assert left.timed_out == (ending == "times-out"), left.output
    found = run_then_healthy(hostile, "python", header + FIND)
    assert found.exit_code == 0, found.output
    for kind in ("shm", "msg", "sem"):
        assert f"{kind} -1 {errno.ENOENT}\n" in found.stdout, found.output
    assert "files [] []" in found.stdout, found.output
    assert secret not in found.output


def test_posix_message_queues_do_not_reach_the_next_block(mode, make_hostile):
    not_for(
        mode,
        "docker-gvisor",
        "gVisor mounts no /dev/mqueue in the container: its POSIX queues cannot "
        "be listed from inside, so none is removed between blocks (a known gap)",
    )
    hostile = make_hostile()
    name = f"/.execbox-{secrets.token_hex(8)}".encode()
    code = (
        "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = libc.mq_open({name!r}, os.O_RDWR | {{flags}}, 0o600, None)\n"
        "print('queue', fd, ctypes.get_errno() if fd < 0 else 0)\n"
    )
    left = hostile.run(CodeBlock("python", code.format(flags="os.O_CREAT")))
    assert left.stdout.startswith("queue ") and " -1 " not in left.stdout, left.output
    found = run_then_healthy(hostile, "python", code.format(flags="0"))
    assert found.stdout == f"queue -1 {errno.ENOENT}\n", found.output
