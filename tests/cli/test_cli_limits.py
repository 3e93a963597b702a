"""``run``/``exec``: the limit options reach the block on the default
sandbox backend, a block that failed for want of the network says the
network is off, and the files of a temporary workspace are kept and said."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from execbox.backends._network_hint import NETWORK_OFF_NOTE as LIBRARY_NOTE
from execbox.backends.sandbox import find_bwrap
from execbox.cli import build_parser, main
from execbox.cli._limit_options import as_flags
from tests.conftest import require

NETWORK_OFF_NOTE = as_flags(LIBRARY_NOTE)  # as the command line says it: the option, not Limits
KEPT = "(kept; --workdir DIR to choose where)"


def execbox(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("execbox", path=os.path.dirname(sys.executable))
    command = [exe] if exe else [sys.executable, "-m", "execbox.cli"]
    return subprocess.run(
        [*command, *args], input=stdin, capture_output=True, text=True, timeout=120, cwd="/"
    )


def _jail() -> None:
    """The default backend with the jail these tests look into (its namespaces, its cgroups)."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def _enforced() -> frozenset[str]:
    from execbox import SandboxExecutor

    executor = SandboxExecutor()
    try:
        return executor.capabilities.enforced
    finally:
        executor.close()


def test_memory_reaches_the_block():
    _jail()
    done = execbox("exec", "--memory", "64M", "-c", "x = bytearray(400 * 1024 * 1024)\nprint('allocated')")
    assert done.returncode != 0 and "allocated" not in done.stdout
    assert "memory limit 64 MB" in done.stdout and "(--memory)" in done.stdout


@pytest.mark.parametrize(
    "given, megabytes",
    [("64", 64), ("64M", 64), ("64mb", 64), ("0.0625G", 64), ("2GiB", 2048), ("1.5g", 1536), ("65536K", 64)],
)
def test_memory_sizes(given, megabytes):
    assert build_parser().parse_args(["exec", "--memory", given, "-c", "1"]).memory_mb == megabytes
    assert (
        build_parser().parse_args(["exec", "--memory-mb", "64", "-c", "1"]).memory_mb == 64
    )  # the old spelling


def test_max_processes_and_cpus_reach_the_block(require_component):
    _jail()
    enforced = _enforced()
    require_component("a pids and cpu cgroup", {"cpus", "max_processes"} <= enforced, "see execbox doctor")
    code = (
        "import resource, time\n"
        "print('nproc', resource.getrlimit(resource.RLIMIT_NPROC)[0])\n"
        "wall, cpu = time.monotonic(), time.process_time()\n"
        "while time.monotonic() - wall < 1.5:\n"
        "    pass\n"
        "print('share', round((time.process_time() - cpu) / (time.monotonic() - wall), 2))\n"
    )
    done = execbox("exec", "--max-processes", "37", "--cpus", "0.2", "-c", code)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split() for line in done.stdout.splitlines())
    assert lines["nproc"] == "37"
    assert float(lines["share"]) < 0.6  # a fifth of a core, not the whole one a busy loop takes


@pytest.mark.parametrize(
    "args, message",
    [
        (["--memory", "2X"], "argument --memory: '2X' is not a size: give megabytes (512) or a size"),
        (["--memory", "0.1K"], "argument --memory: '0.1K' is less than 1 MB"),
        (["--memory-mb", "1.5"], "argument --memory-mb: '1.5' is not a positive whole number of MB"),
        (["--max-processes", "0"], "argument --max-processes: '0' is not a positive whole number"),
        (["--cpus", "nan"], "argument --cpus: 'nan' is not a number of cores from 0.01 to 1024"),
        (["--cpus", "2000"], "argument --cpus: '2000' is not a number of cores"),
    ],
)
def test_bad_limit_values_are_usage_errors(args, message, capsys):
    for command in (["exec", "-c", "1"], ["run", "-"], ["chat", "task"]):
        with pytest.raises(SystemExit) as stopped:
            main([command[0], *args, *command[1:]])
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


def test_a_bad_limit_value_from_the_command():
    done = execbox("exec", "--cpus", "0", "-c", "1")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert (
        "execbox exec: error: argument --cpus: '0' is not a number of cores from 0.01 to 1024" in done.stderr
    )


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"hello from the host"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def loopback_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_network_switch_and_the_network_off_note(loopback_url):
    _jail()
    fetch = (
        f"import urllib.request\nprint(urllib.request.urlopen({loopback_url!r}, timeout=10).read().decode())"
    )
    on = execbox("exec", "--network", "-c", fetch)
    # network on is the internet, not this machine: the host's loopback stays out of reach
    assert on.returncode == 1 and "Connection refused" in on.stderr, on.stderr
    assert "hello from the host" not in on.stdout
    off = execbox("exec", "-c", fetch)
    assert off.returncode == 1 and "Connection refused" in off.stderr
    assert off.stdout.strip() == NETWORK_OFF_NOTE  # the note ends what the result adds
    assert "Limits(network=True)" in LIBRARY_NOTE and "--network turns it on" in NETWORK_OFF_NOTE
    assert NETWORK_OFF_NOTE not in on.stdout + on.stderr


def test_a_failed_lookup_says_the_network_is_off_in_the_reply_result():
    _jail()
    reply = "```python\nimport socket\nsocket.getaddrinfo('example.invalid', 80)\n```\n"
    off = execbox("run", "--no-live", "-", stdin=reply)
    assert off.returncode == 1 and "socket.gaierror" in off.stdout
    assert off.stdout.rstrip().endswith(NETWORK_OFF_NOTE)
    on = execbox("run", "--no-live", "--network", "-", stdin=reply)
    assert on.returncode == 1 and "socket.gaierror" in on.stdout  # example.invalid never resolves
    assert NETWORK_OFF_NOTE not in on.stdout
    ok = execbox("exec", "-c", "print('Connection refused, as a word only')")
    assert ok.returncode == 0 and NETWORK_OFF_NOTE not in ok.stdout + ok.stderr
    local = execbox(
        "exec", "--backend", "local", "-c", "import socket\nsocket.getaddrinfo('example.invalid', 80)"
    )
    assert local.returncode == 1 and NETWORK_OFF_NOTE not in local.stdout + local.stderr  # no switch


def _kept(stderr: str) -> Path:
    lines = [line for line in stderr.splitlines() if line.endswith(KEPT)]
    assert len(lines) == 1, stderr
    return Path(lines[0].removeprefix("execbox: the files are in ").removesuffix(" " + KEPT))


def test_run_keeps_a_temporary_workspace_that_has_files():
    reply = "```python\nopen('primes.txt', 'w').write('2 3 5 7')\n```\n"
    done = execbox("run", "--no-live", "-", stdin=reply)
    assert done.returncode == 0, done.stderr
    assert "Files created or changed: primes.txt" in done.stdout
    kept = _kept(done.stderr)
    try:
        assert kept.name.startswith("execbox-") and (kept / "primes.txt").read_text() == "2 3 5 7"
    finally:
        shutil.rmtree(kept, ignore_errors=True)


def test_a_workspace_without_files_is_removed_and_a_given_one_is_not_said(tmp_path):
    done = execbox("exec", "-c", "import os\nprint(os.getcwd())")
    assert done.returncode == 0 and KEPT not in done.stderr
    workspace = Path(done.stdout.strip())
    assert workspace.name.startswith("execbox-") and not workspace.exists()
    given = execbox("exec", "--workdir", str(tmp_path), "-c", "open('a.txt', 'w').write('x')")
    assert given.returncode == 0 and KEPT not in given.stderr
    assert (tmp_path / "a.txt").read_text() == "x"
