"""State between blocks and between executors (tenants): none.

Seen before: the pool's /dev was one uncapped tmpfs and one IPC namespace for
every unit (a later block read an earlier one's /dev/shm file and SysV
segment; a /dev/stderr link captured a later block's stderr); one-shot jails
of different executors shared one network namespace (a tenant's server on
127.0.0.1 and an abstract socket reached) that host uevents entered; the
block inherited the cgroup.procs and network-namespace descriptors; a
forged status line made run() raise.
"""

from __future__ import annotations

import ast
import os
import secrets
import threading

import pytest

from execbox import CodeBlock
from tests.security.conftest import DOCKER_MODES, not_for, run_then_healthy

pytestmark = pytest.mark.as_user

MiB = 1 << 20
SHM_KEY = 0x5EC2E7

LEAVE_IPC = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
try:
    with open('/dev/shm/execbox-left', 'w') as handle:
        handle.write(SECRET)
except PermissionError:  # the Landlock tier has no /dev/shm where it cannot make the block one of its own
    print('no /dev/shm')
shm = libc.shmget({SHM_KEY}, 4096, 0o1000 | 0o666)
if shm >= 0:
    at = libc.shmat(shm, None, 0)
    ctypes.memmove(at, SECRET.encode(), len(SECRET))
queue = libc.msgget({SHM_KEY}, 0o1000 | 0o666)
print('left', shm, queue)
"""
FIND_IPC = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print('shm file', os.path.exists('/dev/shm/execbox-left'))
print('segment', libc.shmget({SHM_KEY}, 0, 0) >= 0)
print('queue', libc.msgget({SHM_KEY}, 0) >= 0)
for kind in ('shm', 'msg', 'sem'):
    try:
        rows = open('/proc/sysvipc/' + kind).read().splitlines()[1:]
    except OSError:
        rows = []
    print(kind, 'objects', len(rows))
"""


def test_ipc_and_dev_shm_of_a_block_are_gone_for_the_next(mode, hostile):
    not_for(mode, {"jupyter", "stateful"}, "a session keeps its state between blocks by design (README)")
    secret = secrets.token_hex(16)
    left = hostile.run(CodeBlock("python", f"SECRET = {secret!r}\n{LEAVE_IPC}"))
    assert left.exit_code == 0, left.output
    found = run_then_healthy(hostile, "python", FIND_IPC)
    assert found.exit_code == 0, found.output
    assert "shm file False" in found.output, found.output
    assert "segment False" in found.output and "queue False" in found.output, found.output
    for kind in ("shm", "msg", "sem"):
        # the Landlock tier refuses SysV IPC (seccomp): /proc/sysvipc lists the host's namespace
        assert f"{kind} objects 0" in found.output or mode == "landlock", found.output
    assert secret not in found.output


def test_dev_links_do_not_capture_a_later_blocks_output(mode, hostile):
    not_for(mode, "jupyter", "a kernel keeps its state between blocks by design (README)")
    plant = """
import os
for target in ('/dev/stderr', '/dev/stdout'):
    try:
        os.remove(target)
        os.symlink(os.path.abspath('captured'), target)
        print('planted', target)
    except OSError as exc:
        print('refused', target, exc.strerror)
"""
    hostile.run(CodeBlock("python", plant))
    token = secrets.token_hex(8)
    later = run_then_healthy(
        hostile, "bash", f"echo out-{token} > /dev/stdout\necho err-{token} > /dev/stderr"
    )
    assert f"out-{token}" in later.stdout, later.output
    assert f"err-{token}" in later.stderr, later.output
    captured = hostile.workspace.path / "captured"
    assert not captured.exists() or token not in captured.read_text(errors="replace")


def test_dev_shm_is_capped(mode, hostile):
    not_for(
        mode,
        "landlock",
        "no tmpfs of the block's own without namespaces: as root its /dev/shm is a folder "
        "made for it on the host's disk, bounded per file by RLIMIT_FSIZE; as a user who "
        "is not root it has none (tests/security/test_shared_folders.py)",
    )
    result = run_then_healthy(
        hostile, "python", "import os\nst = os.statvfs('/dev/shm')\nprint(st.f_blocks * st.f_frsize)"
    )
    assert result.exit_code == 0, result.output
    # the sandbox's tmp_size_mb (256 MiB by default), Docker's own 64 MiB
    assert int(result.stdout.split()[-1]) <= 256 * MiB, result.output


SERVE = """
import socket, threading, time
def listen(family, address):
    try:
        server = socket.socket(family)
        server.bind(address)
        server.listen()
        return server
    except OSError:  # refused outright (the Landlock tier: no TCP with the network off, no unix streams)
        return None
tcp, unix = listen(socket.AF_INET, ('127.0.0.1', 0)), listen(socket.AF_UNIX, NAME)
def serve(server):
    while True:
        try:
            conn, _ = server.accept()
            conn.sendall(SECRET.encode())
            conn.close()
        except OSError:
            return
for server in (tcp, unix):
    if server is not None:
        threading.Thread(target=serve, args=(server,), daemon=True).start()
print('listening', tcp.getsockname()[1] if tcp is not None else 0, flush=True)
time.sleep(6)
"""
KNOCK = """
import socket
for family, address in ((socket.AF_INET, ('127.0.0.1', PORT)), (socket.AF_UNIX, NAME)):
    try:
        with socket.socket(family) as s:
            s.settimeout(2)
            s.connect(address)
            print('reached', s.recv(100))
    except OSError as exc:
        print('refused', exc.strerror)
"""


def test_executors_do_not_share_a_network(mode, make_hostile):
    tenant, other = make_hostile(), make_hostile()
    secret = secrets.token_hex(16)
    name = f"\0execbox-tenant-{secret[:8]}"
    listening = threading.Event()
    port: list[int] = []
    printed: list[str] = []

    def on_output(stream: str, text: str) -> None:
        printed.append(text)
        for line in "".join(printed).splitlines(keepends=True):
            if line.startswith("listening") and line.endswith("\n") and not listening.is_set():
                port.append(int(line.split()[1]))
                listening.set()

    served: list = []
    server = threading.Thread(
        target=lambda: served.append(
            tenant.run(
                CodeBlock("python", f"SECRET = {secret!r}\nNAME = {name!r}\n{SERVE}"), on_output=on_output
            )
        )
    )
    server.start()
    try:
        assert listening.wait(20), "the tenant's server did not start"
        knocked = other.run(CodeBlock("python", f"PORT = {port[0]}\nNAME = {name!r}\n{KNOCK}"))
    finally:
        server.join()
    assert served and served[0].exit_code == 0, served[0].output if served else "no result"
    assert "reached" not in knocked.output and secret not in knocked.output, knocked.output


LIST_FDS = """
import os
found = {}
for fd in os.listdir('/proc/self/fd'):
    try:
        found[fd] = os.readlink('/proc/self/fd/' + fd)
    except OSError:
        pass
print(found)
"""


def test_no_host_descriptor_is_inherited(mode, hostile):
    result = run_then_healthy(hostile, "python", LIST_FDS)
    assert result.exit_code == 0, result.output
    links = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    for fd, target in links.items():
        assert "cgroup" not in target and not target.startswith("/sys/"), f"fd {fd} -> {target}"
        assert not target.startswith(("net:[", "mnt:[", "user:[", "pid:[")), f"fd {fd} -> {target}"


def test_a_forged_status_line_does_not_break_the_host(mode, hostile):
    not_for(
        mode, {"oneshot", "jupyter", *DOCKER_MODES}, "only a pool unit reports on a socket the block holds"
    )
    forge = """
import os, socket, stat
for fd in map(int, os.listdir('/proc/self/fd')):
    try:
        if stat.S_ISSOCK(os.fstat(fd).st_mode):
            for line in (b'exit x', b'exit 99999999999', b'exit -5', b'exit'):
                os.write(fd, line)
    except OSError:
        pass
print('forged')
"""
    result = run_then_healthy(hostile, "python", forge)
    assert result.exit_code in range(256), result.output


def test_host_device_events_do_not_reach_a_block(mode, hostile):
    not_for(mode, DOCKER_MODES, "the engine gives each container a network namespace of its own")
    if os.geteuid() != 0 or not os.access("/sys/class/mem/null/uevent", os.W_OK):
        pytest.skip("only root can make the host send a device event")
    listening = threading.Event()

    def on_output(stream: str, text: str) -> None:
        if "listening" in text and not listening.is_set():
            listening.set()
            for _ in range(3):
                with open("/sys/class/mem/null/uevent", "w") as handle:
                    handle.write("change")

    code = """
import socket
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, 15)
except OSError as exc:
    print('refused', exc.errno)
    raise SystemExit
s.bind((0, 1))
s.settimeout(2)
print('listening', flush=True)
try:
    print('got', s.recv(4096)[:60])
except OSError as exc:
    print('nothing', exc)
"""
    result = hostile.run(CodeBlock("python", code), on_output=on_output)
    if mode == "landlock":  # the host's network namespace: its netlink sockets are refused outright
        assert result.output.startswith("refused"), result.output
    else:
        assert listening.is_set(), result.output
    assert "got" not in result.output, result.output
    assert hostile.run(CodeBlock("python", "print(6*7)")).output == "42\n"
