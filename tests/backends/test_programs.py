"""The programs execbox runs elsewhere (in a container, a kernel, a jail, an
environment's interpreter), each run here directly from its file, its
parameters given as data, the way its backend gives them.

The container's programs kill processes and empty /tmp: they run in
namespaces of their own (``unshare``, as root), never on the host's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from execbox.backends.docker import _exec
from execbox.backends.docker._exec import IPC_SWEEP_FILE, KILLER_FILE, WRAPPER_FILE, program
from execbox.backends.jupyter._kernel_setup import INKERNEL_SOURCE, setup_code, shell_code
from execbox.backends.sandbox._pool import ZYGOTE_SOURCE
from execbox.environments._packages import PROBE_SOURCE, missing_packages
from execbox.tools._libraries import PROBE_MARK, probe_code

DOCKER = Path(_exec.__file__).parent


def _can_unshare() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    done = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount", "--ipc", "--mount-proc", "true"], capture_output=True
    )
    return done.returncode == 0


needs_unshare = pytest.mark.skipif(
    not _can_unshare(), reason="needs root and unshare (PID, mount, IPC namespaces)"
)


# The wrapper's scene mounts a tmpfs on /tmp: a virtual environment under /tmp
# (a clean clone's, in CI) would vanish with it, and python3 with it. Its base
# interpreter (stdlib only, as the programs need) lives elsewhere.
BASE_PYTHON = str(Path(sys.base_prefix) / "bin" / "python3")


def _in_namespaces(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``script`` as PID 1 (``sh``) of new PID, mount and IPC namespaces."""
    return subprocess.run(
        ["unshare", "--pid", "--fork", "--mount", "--ipc", "--mount-proc", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
    )


def test_the_programs_are_files_of_the_package():
    for path in (
        DOCKER / WRAPPER_FILE,
        DOCKER / KILLER_FILE,
        DOCKER / IPC_SWEEP_FILE,
        INKERNEL_SOURCE,
        PROBE_SOURCE,
        ZYGOTE_SOURCE / "zygote.py",
        ZYGOTE_SOURCE / "run_file.py",
        ZYGOTE_SOURCE / "warm_up.py",
    ):
        assert path.is_file(), path
    assert program(KILLER_FILE) == (DOCKER / KILLER_FILE).read_text(encoding="utf-8")


# -- docker: the killer, the IPC sweep, the wrapper --------------------------------------------------------

# PID 1 of its namespace, like a container's init: the keep-alive first (init's
# oldest child), then processes with and without tokens; the killer; then the
# state of each (a killed one is a zombie of this init, or gone).
KILL_SCENE = """
state() { s=$(cut -d' ' -f3 "/proc/$1/stat" 2>/dev/null); case $s in ''|Z) echo dead ;; *) echo alive ;; esac; }
sleep 100 & keep=$!
EXECBOX_RUN_TOKEN=mine sleep 100 & marked=$!
EXECBOX_RUN_TOKEN=mine sh -c 'env -u EXECBOX_RUN_TOKEN sleep 100 & wait' & parent=$!
EXECBOX_RUN_TOKEN=other sleep 100 & other=$!
EXECBOX_RUN_TOKEN=forged sleep 100 & forged=$!
sleep 100 & orphan=$!
sleep 0.5
child=$(for p in /proc/[0-9]*; do [ "$(cut -d' ' -f4 "$p/stat")" = "$parent" ] && echo "${p#/proc/}"; done)
"$PYTHON" -I "$KILLER" mine other || echo "killer failed"
sleep 0.2
echo "found ${child:+child}"
for name in keep marked parent child other forged orphan; do eval "echo $name \\$(state \\$$name)"; done
"""


@needs_unshare
def test_the_killer_kills_the_marked_and_the_orphans_and_spares_the_rest():
    done = _in_namespaces(KILL_SCENE, PYTHON=sys.executable, KILLER=str(DOCKER / KILLER_FILE))
    states = dict(line.split() for line in done.stdout.splitlines())
    assert states.pop("found") == "child", done.stdout + done.stderr
    assert states == {
        "keep": "alive",
        "other": "alive",  # the keep-alive, and a live token
        "marked": "dead",
        "parent": "dead",
        "child": "dead",  # the token, and its descendants
        "forged": "dead",
        "orphan": "dead",
    }, done.stdout + done.stderr


SWEEP_SCENE = """
import ctypes, subprocess, sys
libc = ctypes.CDLL(None)
assert libc.shmget(0, 4096, 0o600) >= 0 and libc.msgget(0, 0o600) >= 0 and libc.semget(0, 1, 0o600) >= 0
def count():
    return [len(open("/proc/sysvipc/" + kind).read().splitlines()) - 1 for kind in ("shm", "msg", "sem")]
print(count())
subprocess.run([sys.executable, "-I", "-S", sys.argv[1]], check=True)
print(count())
"""


@needs_unshare
def test_the_ipc_sweep_removes_shared_memory_queues_and_semaphores():
    done = subprocess.run(
        ["unshare", "--ipc", sys.executable, "-c", SWEEP_SCENE, str(DOCKER / IPC_SWEEP_FILE)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.splitlines() == ["[1, 1, 1]", "[0, 0, 0]"], done.stdout + done.stderr


# As a container's init: private /tmp and /dev/shm, the keep-alive, leftovers
# of an earlier block; then the wrapper, as docker exec runs it (the texts of
# the programs in its environment), around a block that lists /tmp, leaves a
# process behind and exits 3.
WRAPPER_SCENE = """
mount -t tmpfs none /tmp && mount -t tmpfs none /dev/shm || exit 99
if [ -e /dev/mqueue ]; then mount -t tmpfs none /dev/mqueue || exit 99; fi
sleep 100 &
touch /tmp/left /tmp/.hidden /dev/shm/left
export EXECBOX_RUN_TOKEN=mine EXECBOX_LIVE_TOKENS=
PATH=$(dirname "$PYTHON"):$PATH
/bin/sh -c "$WRAPPER" execbox sh -c 'ls -A /tmp /dev/shm; sleep 100 & echo $! >/tmp/bg; exit 3'
echo "rc $?"
# a SIGKILL is sent, not waited for: the process may take a moment to die (seen under CI's load)
state=alive
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
    s=$(cut -d' ' -f3 "/proc/$(cat /tmp/bg)/stat" 2>/dev/null)
    case $s in ''|Z) state=dead; break ;; esac
    sleep 0.1
done
echo "left $state"
"""


@needs_unshare
def test_the_wrapper_empties_tmp_before_and_kills_leftovers_after_keeping_the_exit_status():
    assert not BASE_PYTHON.startswith("/tmp/"), BASE_PYTHON
    done = _in_namespaces(
        WRAPPER_SCENE,
        PYTHON=BASE_PYTHON,
        WRAPPER=program(WRAPPER_FILE),
        EXECBOX_KILLER=program(KILLER_FILE),
        EXECBOX_IPC_SWEEP=program(IPC_SWEEP_FILE),
    )
    lines = done.stdout.splitlines()
    assert lines[-2:] == ["rc 3", "left dead"], done.stdout + done.stderr
    assert "left" not in "".join(lines[:-2]) and ".hidden" not in done.stdout, done.stdout


def test_the_wrapper_alone_passes_arguments_and_exit_status():
    # on the host it is never alone: it neither empties /tmp nor kills (its killer is a no-op here)
    done = subprocess.run(
        ["sh", str(DOCKER / WRAPPER_FILE), "sh", "-c", 'echo "$@"; exit 5', "x", "a b", "c"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "EXECBOX_KILLER": "import sys; sys.exit(0)"},
    )
    assert (done.returncode, done.stdout) == (5, "a b c\n")


# -- jupyter: the kernel's set-up and shell helper ----------------------------------------------------------

# An IPython shell like the kernel's: streams that are Python objects (as
# ipykernel's OutStream), the executor's code run silently first.
KERNEL_SCENE = """
import json, os, sys
from IPython.core.interactiveshell import InteractiveShell
from execbox.backends.jupyter._kernel_setup import setup_code, shell_code

class Stream:
    def __init__(self):
        self.parts = []
    def write(self, text):
        self.parts.append(text)
        return len(text)
    def flush(self):
        pass

real = sys.stdout
sys.stdout, sys.stderr = Stream(), Stream()
shell = InteractiveShell.instance()
before = set(shell.user_ns)
shell.run_cell(setup_code(1000, sys.argv[1]), silent=True)
after_setup = sorted(set(shell.user_ns) - before)
sys.stdout.parts.clear()
shell.run_cell("for i in range(1000):\\n    print(i)")
capped = "".join(sys.stdout.parts)
sys.stdout.parts.clear()
before = set(shell.user_ns)
shell.run_cell(shell_code(["sh", "-c", "echo out; echo err >&2; exit 7"]))
report = {"after_setup": after_setup, "cwd": os.getcwd(), "capped": capped,
          "shell_out": "".join(sys.stdout.parts), "shell_err": "".join(sys.stderr.parts),
          "rc": shell.user_ns.get("__execbox_rc"),
          "after_shell": sorted(name for name in set(shell.user_ns) - before if name.startswith("__execbox")),
          "outputs_kept": 1 in shell.history_manager.outputs}
real.write(json.dumps(report))
"""


def test_the_kernel_setup_caps_output_and_leaves_no_name_and_the_shell_helper_runs(tmp_path):
    assert f"__execbox_setup({1000!r}, None)" in setup_code(1000)  # parameters as literals after the file
    done = subprocess.run(
        [sys.executable, "-c", KERNEL_SCENE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")},
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["after_setup"] == []  # silent, and the user's namespace clean
    assert report["cwd"] == str(tmp_path)
    lines = report["capped"].splitlines()
    full = "".join(f"{i}\n" for i in range(1000))
    assert lines[:3] == ["0", "1", "2"] and report["capped"].endswith(full[-1000:])  # head and tail kept
    assert "500" not in lines and len(report["capped"]) <= 2 * 1000 + 10
    assert (report["shell_out"], report["shell_err"], report["rc"]) == ("out\n", "err\n", 7)
    assert report["after_shell"] == ["__execbox_rc", "__execbox_shell"]  # what a shell block left before
    assert report["outputs_kept"] is False
    assert shell_code(["sh", "x.sh"]).startswith(INKERNEL_SOURCE.read_text(encoding="utf-8"))


# -- environments: which requirements are missing -----------------------------------------------------------


def test_the_requirement_probe_finds_what_is_missing_by_name_and_version():
    wanted = ["pytest", "pytest >= 1", "pytest<1", "surely-not-installed-execbox", "pytest[extra]"]
    assert missing_packages(sys.executable, wanted) == ["pytest<1", "surely-not-installed-execbox"]


def test_the_requirement_probe_as_a_tool_sends_it_deletes_its_function(capsys):
    namespace: dict[str, object] = {}
    exec(probe_code(["pytest", "surely-not-installed-execbox"]), namespace)
    assert capsys.readouterr().out == PROBE_MARK + json.dumps(["surely-not-installed-execbox"]) + "\n"
    assert "__execbox_probe" not in namespace


# -- sandbox: what the zygote's code process runs -----------------------------------------------------------

RUN_FILE_SCENE = """
import sys
sys.path.insert(0, sys.argv[1])
from run_file import run_python_file
sys.exit(run_python_file(sys.argv[2], sys.argv[2:]))
"""


@pytest.mark.parametrize(
    "code, rc, out, err",
    [
        (
            "import sys\nprint(__name__, sys.argv[1:], __file__ == sys.argv[0])",
            0,
            "__main__ ['a b'] True\n",
            "",
        ),
        ("import sys\nsys.exit('bad things')", 1, "", "bad things\n"),
        ("import atexit\natexit.register(print, 'bye')\nraise SystemExit(4)", 4, "bye\n", ""),
    ],
)
def test_run_file_runs_a_python_file_as_python_would(tmp_path, code, rc, out, err):
    block = tmp_path / "block.py"
    block.write_text(code)
    done = subprocess.run(
        [sys.executable, "-B", "-c", RUN_FILE_SCENE, str(ZYGOTE_SOURCE), str(block), "a b"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (rc, out, err)


def test_run_file_reports_an_error_without_its_own_frame(tmp_path):
    block = tmp_path / "block.py"
    block.write_text("def f():\n    raise ValueError('boom')\nf()\n")
    done = subprocess.run(
        [sys.executable, "-B", "-c", RUN_FILE_SCENE, str(ZYGOTE_SOURCE), str(block)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.endswith("ValueError: boom\n")
    assert "run_file.py" not in done.stderr and f'File "{block}", line 3, in <module>' in done.stderr


def test_the_warm_up_sample_compiles_and_prints_where_it_is_told(capsys):
    import io

    out = io.StringIO()
    source = (ZYGOTE_SOURCE / "warm_up.py").read_text(encoding="utf-8")
    exec(compile(source, "<warm-up>", "exec", dont_inherit=True), {"OUT": out})
    assert out.getvalue().startswith("(['01', '11', '21'], {'a': 1.5}, ())")
    assert capsys.readouterr().out == ""
