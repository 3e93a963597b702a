"""What a block leaves for the host to handle after it: the host (often
root) must never read, write, list or run anything of its own because of
it, nor raise or hang.

Seen before: the Jupyter backend read the block's code file back (a thread of
an earlier cell swapped it for a link to a root-only file, which was sent
into the cell; a FIFO hung run()); a folder planted at the next predictable
code-file name made every later block fail; an ``outputs`` link made run()
raise before the block's processes were killed; displays bypassed
``Limits.max_output_bytes`` (60 MB kept, 143 MB written under a 4 KiB
limit); file names with a newline or bytes that are not UTF-8 made
``to_text().encode()`` raise and forged an ``exitcode: 0`` line; the change
report listed a whole folder of 200k files before its cap on every run; a
block left a set-user-ID copy of a shell in the workspace.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import stat
import threading
import time
from pathlib import Path

import pytest

from execbox import CodeBlock, ExecutionResult, Executor
from execbox._workspace import MAX_SCANNED_ENTRIES
from tests.conftest import marked, wait_dead
from tests.security.conftest import LIMITS, SEALED, not_for, run_then_healthy

pytestmark = pytest.mark.as_user

KERNEL_ONLY = {
    "pool",
    "oneshot",
    "docker",
    "docker-gvisor",
    "landlock",
    "remote",
}  # remote: a sandbox behind HTTP


# Where execbox's own folder is not the block's to write (the host made it,
# as another identity), the block takes it over: the workspace is its own.
# The namespace sandbox mounts it read-only for its blocks (``sealed``): nothing to take.
TAKE_OVER = """
import errno, os, sys
try:
    if os.path.isdir('.execbox') and not os.access('.execbox/code' if os.path.isdir('.execbox/code')
                                                   else '.execbox', os.W_OK):
        os.rename('.execbox', f'execbox-taken-{os.getpid()}')
    os.makedirs('.execbox/code', exist_ok=True)
except OSError as exc:
    if exc.errno not in (errno.EROFS, errno.EBUSY):
        raise
    sealed = True
else:
    sealed = False
"""


def run_in_thread(
    executor: Executor, block: CodeBlock
) -> tuple[threading.Thread, list[ExecutionResult | BaseException]]:
    """``executor.run(block)`` in a daemon thread: the thread, and a list
    that gets the result (or the exception) when run() returns."""
    done: list[ExecutionResult | BaseException] = []

    def work() -> None:
        try:
            done.append(executor.run(block))
        except BaseException as exc:  # noqa: BLE001 (handed to the test, which raises it)
            done.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, done


def run_or_fail(executor: Executor, block: CodeBlock, hang_s: float) -> ExecutionResult:
    """``executor.run(block)``; fails the test, instead of hanging it, if run()
    has not returned after ``hang_s`` seconds (a liveness bound far past the
    block's own timeout, not a speed check)."""
    thread, done = run_in_thread(executor, block)
    thread.join(hang_s)
    assert done, (
        f"run() did not return within {hang_s:.0f} s (Limits.timeout_s is {executor.limits.timeout_s})"
    )
    if isinstance(done[0], BaseException):
        raise done[0]
    return done[0]


# A thread left running in the kernel: every new file in .execbox/code is
# replaced, as soon as it appears, by PLANT(path).
SWAPPER = (
    TAKE_OVER
    + r"""
import ctypes, struct, threading
CODE = os.path.abspath('.execbox/code')
libc = ctypes.CDLL(None, use_errno=True)

def swap():
    fd = libc.inotify_init()
    libc.inotify_add_watch(fd, CODE.encode(), 0x100 | 0x80 | 0x8)  # IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE
    planted = set()
    while True:
        data, pos = os.read(fd, 65536), 0
        while pos < len(data):
            _, _, _, length = struct.unpack_from('iIII', data, pos)
            name = data[pos + 16:pos + 16 + length].rstrip(b'\0').decode()
            pos += 16 + length
            if name.startswith('.') or name in planted:
                continue
            planted.add(name)
            path = os.path.join(CODE, name)
            try:
                os.unlink(path)
                PLANT(path)
            except OSError:
                pass

threading.Thread(target=swap, daemon=True).start()
print('watching')
"""
)


@pytest.mark.parametrize("plant", ["link", "fifo"])
def test_the_code_file_swapped_under_the_host_is_not_read(mode, make_hostile, secret, plant):
    not_for(
        mode,
        KERNEL_ONLY,
        "what a block starts ends with it here; only a kernel keeps a thread of "
        "an earlier block running, and only the Jupyter backend sends the code's text",
    )
    not_for(
        mode,
        {"stateful", "jupyter"},
        "the session (the kernel) keeps a block's threads, but .execbox/ is "
        "read-only in its jail: nothing to swap (and it is sent the code's text)",
    )
    secret_path, token = secret
    executor = make_hostile()
    how = f"lambda path: os.symlink({str(secret_path)!r}, path)" if plant == "link" else "os.mkfifo"
    started = executor.run(CodeBlock("python", f"import os\nPLANT = {how}\n{SWAPPER}"))
    assert started.output == "watching\n", started.output
    hang_s = executor.limits.timeout_s * 3 + 30
    for n in range(8):
        result = run_or_fail(executor, CodeBlock("python", f"print({n} * 6 * 7)"), hang_s)
        assert result.exit_code == 0, result.output
        assert result.output == f"{n * 42}\n"
        assert token not in result.to_text() + result.to_json()
    swapped = [
        p
        for p in (executor.workspace.path / ".execbox" / "code").iterdir()
        if p.is_symlink() or stat.S_ISFIFO(p.lstat().st_mode)
    ]
    assert swapped, "the thread swapped no code file: the attempt did not happen"


def test_folders_planted_at_code_file_names_do_not_stop_later_blocks(mode, hostile):
    # the names the old scheme (pid_counter_index) gave, and a few made-up ones
    old = [f"{os.getpid()}_{run}_{index}.py" for run in range(1, 1500) for index in range(2)]
    names = old + [f"{secrets.token_hex(8)}_0.py" for _ in range(20)] + ["x.py"]
    code = (
        f"{TAKE_OVER}\nif sealed:\n    print('sealed')\nelse:\n    for name in {names!r}:\n"
        "        os.makedirs(f'.execbox/code/{name}/inside', exist_ok=True)\n    print('planted')"
    )
    assert hostile.run(CodeBlock("python", code)).output == ("sealed\n" if mode in SEALED else "planted\n")
    for n in range(4):
        result = hostile.run(CodeBlock("python", f"print({n} + 1)"))
        assert result.exit_code == 0, result.output
        assert result.output == f"{n + 1}\n"
    # and at the file's own name: a folder, a FIFO, a socket are moved aside or replaced
    planted = (
        f"{TAKE_OVER}\nif not sealed:\n"
        "    import socket\n    os.makedirs('.execbox/code/dir.py/inside', exist_ok=True)\n"
        "    os.mkfifo('.execbox/code/fifo.py')\n"
        "    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).bind('.execbox/code/sock.py')\n"
        "print('planted')"
    )
    assert hostile.run(CodeBlock("python", planted)).output == "planted\n"
    for name in ("dir.py", "fifo.py", "sock.py"):
        saved = hostile.workspace.write_internal(f".execbox/code/{name}", b"print('mine')\n")
        assert stat.S_ISREG(saved.lstat().st_mode)
        assert hostile.workspace.read_internal(f".execbox/code/{name}") == b"print('mine')\n"


PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(64)).decode()


def test_an_outputs_link_neither_raises_nor_spares_the_blocks_processes(mode, hostile, tmp_path):
    not_for(mode, KERNEL_ONLY, "only the Jupyter backend saves displays in outputs/")
    not_for(
        mode,
        "stateful",
        "IPython's display() is a kernel's; the session's figures meet a planted outputs "
        "link in tests/backends/test_sandbox_stateful.py",
    )
    outside = tmp_path / "outside"
    outside.mkdir()
    marker = f"execbox-stray-{secrets.token_hex(6)}"
    code = (
        f"import os, subprocess, sys\nos.symlink({str(outside)!r}, 'outputs')\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1000)', {marker!r}])\n"
        "from IPython.display import display\n"
        f"display({{'image/png': {PNG!r}, 'text/plain': 'an image'}}, raw=True)\nprint('shown')"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "shown" in result.output
    assert "image/png not saved" in result.output, result.output
    assert not [d for d in result.displays if d.mime_type == "image/png"]
    assert wait_dead(marked(marker)) == [], "the block's process outlived it"
    assert list(outside.iterdir()) == [], "the host wrote through the planted link"


def test_displays_are_bounded_by_max_output_bytes(mode, make_hostile):
    not_for(mode, KERNEL_ONLY, "only a kernel sends displays")
    executor = make_hostile(LIMITS.replace(max_output_bytes=4096))
    code = (
        "import base64, os\nfrom IPython.display import display\n"
        "blob = base64.b64encode(os.urandom(1 << 20)).decode()\n"
        "for _ in range(20):\n    display({'image/png': blob, 'text/plain': 'a megabyte'}, raw=True)\n"
        "print('shown')"
    )
    result = run_then_healthy(executor, "python", code)
    assert result.exit_code == 0, result.output
    kept = sum(len(d.data or "") for d in result.displays)
    saved = [executor.workspace.path / d.path for d in result.displays if d.path]
    kept += sum(p.stat().st_size for p in saved)
    assert kept <= 4096, f"{kept} bytes of displays kept under Limits.max_output_bytes=4096"
    outputs = executor.workspace.path / "outputs"
    written = sum(p.stat().st_size for p in outputs.rglob("*")) if outputs.exists() else 0
    assert written <= 4096, f"{written} bytes written to outputs/"
    assert result.truncated
    assert "Limits.max_output_bytes" in result.output and "dropped" in result.output, result.output


FORGED = "\nexitcode: 0 (execution succeeded)\n"


def test_file_names_neither_break_rendering_nor_forge_the_status(mode, hostile):
    code = f"open(b'bad\\xff', 'w').close()\nopen({('x' + FORGED + 'y')!r}, 'w').close()\nraise SystemExit(1)"
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 1, result.output
    bad = "bad\\xff" if mode == "remote" else os.fsdecode(b"bad\xff")  # JSON carries the name escaped
    assert sorted(result.files) == sorted([bad, "x" + FORGED + "y"])
    text = result.to_text()
    text.encode("utf-8")
    result.to_text("plain").encode("utf-8")
    result.to_json().encode("utf-8")
    json.dumps(result.to_dict(), ensure_ascii=False).encode("utf-8")
    status = [line for line in text.splitlines() if line.startswith("exitcode:")]
    assert status == ["exitcode: 1 (execution failed)"], text


MANY = 2 * MAX_SCANNED_ENTRIES  # twice what a run's change report scans: the cut must show


def test_a_folder_of_many_files_does_not_slow_every_later_run(make_hostile):
    executor = make_hostile(LIMITS.replace(timeout_s=120))
    code = (
        f"import os\nos.mkdir('many')\nfor n in range({MANY}):\n"
        "    os.close(os.open(f'many/{n}', os.O_CREAT | os.O_WRONLY, 0o644))\nprint('made')"
    )
    made = executor.run(CodeBlock("python", code))
    assert made.output == "made\n", made.output
    assert len(made.files) <= MAX_SCANNED_ENTRIES and made.files_truncated
    took = []
    for _ in range(3):
        began = time.monotonic()
        later = executor.run(CodeBlock("python", "print(6*7)"))
        took.append(time.monotonic() - began)
        assert later.output == "42\n", later.output
        assert len(later.files) <= MAX_SCANNED_ENTRIES
        assert later.files_truncated and "too big to check whole" in later.to_text()
    print(f"\nruns after {MANY} files were made: " + ", ".join(f"{t * 1000:.0f} ms" for t in took))


SWAP_FOLDER = r"""
import os, threading, time

def swap():
    while True:
        try:
            os.rename('sub', 'sub.real')
            os.symlink(HOST, 'sub')
            time.sleep(0.002)
            os.unlink('sub')
            os.rename('sub.real', 'sub')
            time.sleep(0.002)
        except OSError:
            pass

os.makedirs('sub/inner', exist_ok=True)
for n in range(3000):  # the host's walk spends a while here between seeing sub/ and listing it
    open(f'filler-{n}', 'w').close()
threading.Thread(target=swap, daemon=True).start()
print('swapping')
"""


def test_a_folder_swapped_for_a_host_link_is_never_listed(mode, make_hostile, tmp_path):
    not_for(mode, KERNEL_ONLY, "only a kernel keeps a thread of a block running while the host walks")
    host = tmp_path / "host"
    host.mkdir()
    token = f"HOSTFILE-{secrets.token_hex(6)}"
    for n in range(50):
        (host / f"{token}-{n}").write_text("")
    executor = make_hostile()
    started = executor.run(CodeBlock("python", f"HOST = {str(host)!r}\n{SWAP_FOLDER}"))
    assert started.output == "swapping\n", started.output
    for n in range(20):
        result = executor.run(CodeBlock("python", f"open('sub/inner/f{n}', 'w').close()"))
        assert not [f for f in result.files if token in f], result.files
        assert not [f.path for f in executor.workspace.list() if token in f.path]


SETID = (
    TAKE_OVER
    + r"""
import shutil
os.makedirs('deep/er', exist_ok=True)
shutil.copy('/bin/sh', 'rootsh')
open('mine.sh', 'w').write('#!/bin/sh\nid\n')
for name, bits in (('rootsh', 0o4755), ('mine.sh', 0o2755), ('deep/er/both', 0o6755), ('.execbox/hidden', 0o4755)):
    if sealed and name.startswith('.execbox/'):
        print('sealed', name)
        continue
    if not os.path.exists(name):
        shutil.copy('/bin/sh', name)
    try:
        os.chmod(name, bits)
        print('chmod', name, oct(os.stat(name).st_mode))
    except OSError as exc:
        print('chmod refused', name, exc.errno)
try:
    os.close(os.open('created', os.O_CREAT | os.O_WRONLY, 0o4755))
    print('created', oct(os.stat('created').st_mode))
except OSError as exc:
    print('create refused', exc.errno)
"""
)


def test_no_set_id_file_is_left_in_the_workspace(hostile):
    result = run_then_healthy(hostile, "python", SETID)
    assert "rootsh" in result.output, result.output
    found = []
    for folder, _, files in os.walk(hostile.workspace.path):
        for name in files:
            mode = os.lstat(os.path.join(folder, name)).st_mode
            if stat.S_ISREG(mode) and mode & (stat.S_ISUID | stat.S_ISGID):
                found.append((os.path.relpath(os.path.join(folder, name), hostile.workspace.path), oct(mode)))
    assert found == [], f"set-ID files left in the workspace: {found}\n{result.output}"
    assert Path(hostile.workspace.path / "rootsh").is_file()
