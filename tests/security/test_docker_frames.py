"""The Docker agent's channel to the host: a block must not be able to speak
for the agent, and nothing the host reads on that channel may make ``run()``
raise, hang, or let a block outlive its timeout.

Seen before: PID 1 (Docker's init) held the container's stdio pipes and ran
as the block's uid, so a block opened ``/proc/1/fd/1`` and wrote frames the
host took for the agent's: a forged ``EXIT 0`` with forged output came back
at once while the real block ran on past its timeout, unkilled; a malformed
EXIT made ``run()`` raise; a 2 GB frame header ended a concurrent block with
137. Under gVisor a non-dumpable holder does not help: its ``/proc/PID/fd``
stays open to its uid, and PID 1 can be signalled from inside.

What holds now (``_agent/blockuser.py``): blocks run under another uid than
the holders of the channel (init and the agent keep root as their real
uid), so they can neither open, chmod nor signal them. Judged here from
the host, on runc and on gVisor (modes ``docker`` and ``docker-gvisor``):

- the block's attempts on every descriptor of PID 1 and of the agent (a
  forged EXIT, a 2 GB header, a malformed EXIT) reach nothing: the result
  is the real one, the block is killed by its timeout, a block running
  beside it is unaffected, and the executor runs ordinary code after;
- where a block did reach the channel (a leaky agent, ``leaky_agent.py``,
  hands it over): every malformed frame becomes a failed result that names
  it, the container is replaced, and a block that forged its end still dies
  at its deadline (the agent's own, ``DEADLINE_GRACE_S`` after the timeout);
- an agent that cannot keep blocks off the channel does not run them;
- and, with no engine at all, the host's end against a scripted agent:
  every kind of malformed frame, beside a concurrent block.
"""

from __future__ import annotations

import json
import shutil
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from execbox import CodeBlock, ExecutionResult
from execbox.backends.docker import _container
from execbox.backends.docker._agent import wire
from execbox.backends.docker._agent_run import run_block
from execbox.backends.docker._link import DEADLINE_GRACE_S, AgentLink
from tests.security.conftest import (
    DOCKER_MODES,
    LIMITS,
    MODES,
    REQUIRES,
    TIMING_OUT,
    not_for,
    run_then_healthy,
)

# Not ``as_user``: what is judged here happens inside the container (the
# block's uid against the channel's holders'), the same whoever runs execbox
# on the host; the host side of a user in the docker group is test_docker_host's.


@pytest.fixture
def docker_mode(mode):
    not_for(mode, set(MODES) - DOCKER_MODES, "these attacks aim at the Docker agent's channel")
    REQUIRES[mode]()  # an engine (and gVisor): skipped with the reason where there is none
    return mode


def _own(kind: int, payload: bytes) -> bytes:
    """A frame of the writer's own block: BLOCK stands for its id."""
    return struct.pack(">B", kind) + b"BLOCK" + struct.pack(">I", len(payload)) + payload


# What a block writes where it hopes the host reads the agent: block ids 1 to 64 (it cannot know its own)
SPRAYS = {
    "forged-exit": b"".join(
        wire.pack(wire.STDOUT, b, b"FORGED\n") + wire.pack(wire.EXIT, b, b'{"code": 0}') for b in range(1, 65)
    ),
    "2gb-header": struct.pack(">BII", wire.STDOUT, 1, 2**31) + b"x" * 64,
    "malformed-exit": b"".join(wire.pack(wire.EXIT, b, b'{"code": "zero",') for b in range(1, 65)),
}

# Every descriptor of PID 1 and of the processes not of the block's uid (the agent: root's real uid),
# through /proc/PID/fd and /proc/PID/task/TID/fd: opened to write (the spray), to read (stealing the
# host's commands), chmod'ed; each holder signalled. Prints what worked, then outlives its timeout.
# Left alone, and counted as "own": what the block user owns already, the agent's ends of the blocks'
# output pipes (gVisor lists them: its /proc/PID/fd is open to the uid, whoever holds the descriptor;
# the blocks' pipes are theirs, so that `echo > /dev/stdout` works) and /dev/null.
ATTACK = """
import os, signal, stat, subprocess, sys, time
SPRAY = bytes.fromhex({spray!r})
subprocess.Popen(['sleep', {marker!r}])
def uid_of(pid):
    for line in open('/proc/%s/status' % pid):
        if line.startswith('Uid:'):
            return int(line.split()[1])
def owned_already(handle):
    st = os.fstat(handle)
    return ((stat.S_ISFIFO(st.st_mode) and st.st_uid == os.getuid())
            or (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat('/dev/null').st_rdev))
holders = []
for pid in os.listdir('/proc'):
    try:
        if pid.isdigit() and (pid == '1' or uid_of(pid) != os.getuid()):
            holders.append(pid)
    except OSError:
        pass
reached, own = [], []
for pid in holders:
    bases = ['/proc/%s' % pid]
    try:
        bases += ['/proc/%s/task/%s' % (pid, tid) for tid in os.listdir('/proc/%s/task' % pid)]
    except OSError:
        pass
    for base in bases:
        try:
            fds = os.listdir(base + '/fd')
        except OSError:
            fds = ['0', '1', '2']  # not listed: the stdio all the same
        for fd in fds:
            path = '%s/fd/%s' % (base, fd)
            for flags in (os.O_WRONLY, os.O_RDWR, os.O_RDONLY):
                try:
                    handle = os.open(path, flags | os.O_NONBLOCK)
                except OSError:
                    continue
                try:
                    if fd not in ('0', '1', '2') and owned_already(handle):
                        own.append(path)
                    elif flags == os.O_RDONLY:
                        reached.append('read ' + path)
                    else:
                        os.write(handle, SPRAY)
                        reached.append('wrote ' + path)
                except OSError:
                    reached.append('opened ' + path)
                finally:
                    os.close(handle)
            try:
                os.chmod(path, 0o666)
                if path not in own:
                    reached.append('chmod ' + path)
            except OSError:
                pass
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try:
            os.kill(int(pid), sig)
            reached.append('signalled %s %d' % (pid, sig))
        except OSError:
            pass
print('holders', len(holders), 'reached', reached, 'own', len(own), flush=True)
time.sleep(60)
print('the real end', flush=True)
"""

LEFT = (
    "import os\nfound = [p for p in os.listdir('/proc') if p.isdigit() and {marker!r}.encode() in "
    "open('/proc/%s/cmdline' % p, 'rb').read()]\nprint('left', found)\n"
)


def _concurrently(executor, code: str) -> tuple[threading.Thread, dict[str, ExecutionResult]]:
    """Start ``code`` in a thread; its result lands in the returned dict."""
    results: dict[str, ExecutionResult] = {}
    thread = threading.Thread(
        target=lambda: results.__setitem__("it", executor.run(CodeBlock("python", code)))
    )
    thread.start()
    return thread, results


BESIDE = "import time\nprint('beside 1', flush=True)\ntime.sleep({sleep})\nprint('beside 2')\n"


@pytest.mark.ends_by_timeout
@pytest.mark.parametrize("spray", sorted(SPRAYS))
def test_a_block_cannot_write_to_the_hosts_channel(docker_mode, hostile, spray):
    marker = f"{int(time.time() * 1000) % 10**9}.{len(spray)}"
    container = hostile.container_id
    thread, beside = _concurrently(hostile, BESIDE.format(sleep=TIMING_OUT.timeout_s / 2))
    time.sleep(0.5)  # the block beside is running (its id is among those sprayed)
    started = time.monotonic()
    result = hostile.run(CodeBlock("python", ATTACK.format(spray=SPRAYS[spray].hex(), marker=marker)))
    took = time.monotonic() - started
    thread.join(timeout=30)
    assert result.stdout.startswith("holders "), result.output
    holders = int(result.stdout.split()[1])
    assert holders >= 2, result.output  # init and the agent were found
    assert "reached []" in result.stdout, result.output
    assert "FORGED" not in result.output and "the real end" not in result.output
    assert result.timed_out and result.exit_code == 124, result.output
    assert took >= TIMING_OUT.timeout_s - 0.1, took
    assert beside["it"].exit_code == 0 and beside["it"].output == "beside 1\nbeside 2\n", beside["it"].output
    after = run_then_healthy(hostile, "python", LEFT.format(marker=marker))
    assert after.output == "left []\n", after.output  # the block and its child were killed
    assert hostile.container_id == container  # nothing broke the link, nothing killed the agent


# -- where a block does reach the channel: a leaky agent ---------------------------

LEAKY = Path(__file__).with_name("leaky_agent.py")


@pytest.fixture
def make_leaky(docker_mode, make_hostile, tmp_path, monkeypatch):
    """Executors whose agent hands each block the channel (``leaky_agent.py``)."""
    folder = tmp_path / "leaky-agent"
    shutil.copytree(_container.AGENT_SOURCE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "agent.py").rename(folder / "real_agent.py")
    shutil.copy(LEAKY, folder / "agent.py")
    for path in [folder, *folder.iterdir()]:
        path.chmod(0o755 if path.is_dir() else 0o644)  # read by the container's root, which has no DAC bypass
    monkeypatch.setattr(_container, "AGENT_SOURCE", folder)
    return make_hostile


# Writes ``FRAMES`` (hex; BLOCK stands for its own id) to the channel, then lives on
LEAK = """
import os, subprocess, time
me = int(os.environ['EXECBOX_LEAKED_ID'])
subprocess.Popen(['sleep', {marker!r}])
os.write(3, bytes.fromhex({frames!r}).replace(b'BLOCK', me.to_bytes(4, 'big')))
time.sleep({sleep})
open('outlived', 'w').write('the block outlived its deadline')
"""

# EXIT reports no agent sends
BAD_EXITS = {
    "exit-not-json": b'{"code": ',
    "exit-code-a-string": b'{"code": "0"}',
    "exit-code-out-of-range": b'{"code": 4096}',
    "exit-not-an-object": b"[0]",
    "exit-too-large": json.dumps({"code": 0, "note": "x" * 8000}).encode(),
}
MALFORMED = {
    "2gb-header": struct.pack(">B", wire.STDOUT) + b"BLOCK" + struct.pack(">I", 2**31),
    "unknown-kind": _own(ord("z"), b""),
    **{case: _own(wire.EXIT, payload) for case, payload in BAD_EXITS.items()},
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_frame_is_a_failed_result_and_a_new_container(make_leaky, case):
    leaky = make_leaky(LIMITS)
    first = leaky.container_id
    marker = f"{int(time.time() * 1000) % 10**9}.{len(case)}"
    thread, beside = _concurrently(leaky, BESIDE.format(sleep=2))
    time.sleep(0.5)
    started = time.monotonic()
    result = leaky.run(
        CodeBlock("python", LEAK.format(frames=MALFORMED[case].hex(), marker=marker, sleep=60))
    )
    took = time.monotonic() - started
    thread.join(timeout=30)
    assert result.error is not None and result.error.name == "ContainerDied", result.output
    assert "malformed frame" in result.output and "cannot be trusted" in result.output, result.output
    assert took < LIMITS.timeout_s, took  # its container was killed at once, the block with it
    # the block beside shared the broken stream: it ends as a failure that says so, never as an exception
    other = beside["it"]
    assert other.output.startswith("beside 1\n"), other.output
    assert other.exit_code == 0 or (other.error is not None and other.error.name == "ContainerDied"), (
        other.output
    )
    after = run_then_healthy(leaky, "python", LEFT.format(marker=marker))
    assert after.output == "left []\n", after.output
    assert leaky.container_id != first
    assert not (leaky.workspace.path / "outlived").exists()


def test_a_block_that_forged_its_end_still_dies_at_its_deadline(make_leaky):
    # a well-formed EXIT 0 cannot be told from the agent's own (blocks must not reach the channel:
    # test_a_block_cannot_write_to_the_hosts_channel); the real block dies at the agent's deadline
    leaky = make_leaky(TIMING_OUT)
    marker = f"{int(time.time() * 1000) % 10**9}.77"  # a valid interval: sleep must live
    frames = _own(wire.STDOUT, b"FORGED\n") + _own(wire.EXIT, b'{"code": 0}')
    sleep = TIMING_OUT.timeout_s + DEADLINE_GRACE_S + 3
    result = leaky.run(CodeBlock("python", LEAK.format(frames=frames.hex(), marker=marker, sleep=sleep)))
    assert result.output == "FORGED\n", result.output  # on a leaked channel it reads as the agent's word
    time.sleep(sleep + 1)
    after = run_then_healthy(leaky, "python", LEFT.format(marker=marker))
    assert after.output == "left []\n", after.output
    assert not (leaky.workspace.path / "outlived").exists(), "the real block outlived its deadline"


def test_an_agent_that_cannot_keep_blocks_off_the_channel_does_not_run_them(docker_mode, tmp_path):
    # the container's capabilities taken away: the agent cannot run blocks under another uid, refuses
    # to start, and blocks run as docker exec (each on a channel of its own)
    from execbox import DockerExecutor

    runtime = "runsc" if docker_mode == "docker-gvisor" else None
    executor = DockerExecutor(
        workspace=tmp_path / "ws", runtime=runtime, limits=TIMING_OUT, container_create_kwargs={"cap_add": []}
    )
    with pytest.warns(UserWarning) as warned:
        executor.start()
    try:
        result = executor.run(CodeBlock("python", "import os\nprint(os.getuid() != 0)"))
    finally:
        executor.close()
    refusals = [str(w.message) for w in warned if "agent did not start" in str(w.message)]
    assert refusals and "execbox-agent: the agent could not take its identity" in refusals[0], refusals
    assert result.output == "True\n", result.output


# -- the host's end, against a scripted agent (no engine) -------------------------


class _Api:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def attach_socket(self, container_id: str, params: dict) -> socket.socket:
        return self.sock


class _Client:
    def __init__(self, sock: socket.socket) -> None:
        self.api = _Api(sock)


class _ScriptedAgent:
    """The container's side of the attached stream: answers HELLO and RUN
    as the agent would, block 1 with ``first``, the others with ``then``
    (bytes: the agent's frames, BLOCK for the block id)."""

    def __init__(self, sock: socket.socket, first: bytes, then: bytes) -> None:
        self.sock, self.first, self.then = sock, first, then
        self.frames = wire.Frames()
        threading.Thread(target=self.serve, daemon=True).start()

    def out(self, data: bytes) -> None:
        for at in range(0, len(data), 1 << 15):  # as the engine frames a container's stdout
            chunk = data[at : at + (1 << 15)]
            self.sock.sendall(struct.pack(">BxxxL", 1, len(chunk)) + chunk)

    def serve(self) -> None:
        try:
            while data := self.sock.recv(1 << 16):
                for kind, block, _ in self.frames.feed(data):
                    if kind == wire.HELLO:
                        self.out(wire.pack_json(wire.READY, 0, {"pid": 7, "programs": ["python3"]}))
                    elif kind == wire.RUN:
                        script = self.first if block == 1 else self.then
                        self.out(
                            wire.pack(wire.STARTED, block)
                            + script.replace(b"BLOCK", struct.pack(">I", block))
                        )
        except OSError:
            pass


def _run(link: AgentLink, killed: list[str], results: dict, name: str, on_output=None) -> None:
    results[name] = run_block(
        link,
        argv=["python3", "x.py"],
        python_file=None,
        workdir="/workspace",
        timeout_s=20,
        output_limit=1 << 20,
        cancel=None,
        on_output=on_output,
        kill_container=lambda: killed.append(name),
    )


HOST_CASES = {
    **MALFORMED,
    # more than the window (and a pipe read of each pipe past it) unconsumed: the host's memory is bounded
    "output-past-the-window": _own(wire.STDOUT, b"y" * wire.MAX_PAYLOAD)
    * (wire.WINDOW // wire.MAX_PAYLOAD + 4),
}


@pytest.mark.parametrize("case", sorted(HOST_CASES))
def test_the_host_turns_every_malformed_frame_into_a_failed_result(case):
    host, agent = socket.socketpair()
    # block 1 runs beside, silent; block 2 sends the malformed frame
    _ScriptedAgent(agent, first=b"", then=HOST_CASES[case])
    link = AgentLink(_Client(host), "fake")
    try:
        link.handshake(timeout_s=5)
        killed: list[str] = []
        results: dict = {}
        beside = threading.Thread(target=_run, args=(link, killed, results, "beside"))
        beside.start()
        time.sleep(0.2)
        started = time.monotonic()
        _run(link, killed, results, "malformed", on_output=lambda stream, text: time.sleep(0.5))  # (slow)
        beside.join(timeout=10)
        took = time.monotonic() - started
    finally:
        link.close()
        agent.close()
    for name in ("malformed", "beside"):
        outcome = results[name]
        assert outcome.malformed and "malformed frame" in outcome.malformed, (name, outcome)
        assert outcome.exit_code == 137 and not outcome.timed_out, (name, outcome)
    assert "malformed" in killed, killed  # its container killed: the stream cannot be trusted
    assert took < 5, took


def test_a_well_formed_frame_of_no_running_block_is_ignored():
    host, agent = socket.socketpair()
    stray = wire.pack(wire.STDOUT, 999, b"stray") + wire.pack(wire.EXIT, 999, b'{"code": 0}')
    _ScriptedAgent(
        agent, first=stray + _own(wire.STDOUT, b"mine\n") + _own(wire.EXIT, b'{"code": 3}'), then=b""
    )
    link = AgentLink(_Client(host), "fake")
    try:
        link.handshake(timeout_s=5)
        killed: list[str] = []
        results: dict = {}
        _run(link, killed, results, "block")
    finally:
        link.close()
        agent.close()
    outcome = results["block"]
    assert outcome.malformed is None and not killed
    assert outcome.exit_code == 3 and outcome.capture.combined.text() == "mine\n"


def test_the_wire_bounds_every_frame():
    frames = wire.Frames()
    with pytest.raises(ValueError, match="at most"):
        frames.feed(struct.pack(">BII", wire.STDOUT, 1, 2**31))
    assert (
        wire.Frames().feed(wire.pack(wire.STDOUT, 1, b"y" * wire.MAX_PAYLOAD))[0][2]
        == b"y" * wire.MAX_PAYLOAD
    )
    with pytest.raises(ValueError):
        wire.Frames().feed(wire.pack(wire.STDOUT, 1, b"y" * (wire.MAX_PAYLOAD + 1)))
    with pytest.raises(ValueError, match="unknown kind"):
        wire.check_from_agent(ord("z"), 0)
    with pytest.raises(ValueError, match="at most"):
        wire.check_from_agent(wire.EXIT, wire.MAX_CONTROL + 1)
    wire.check_from_agent(wire.STDOUT, wire.MAX_PAYLOAD)
    for payload in BAD_EXITS.values():
        with pytest.raises(ValueError):
            wire.check_from_agent(wire.EXIT, len(payload))
            wire.read_exit(payload)
    assert (
        wire.read_exit(b'{"code": 0, "oom_kills": null, "note": "", "timed_out": true}')["timed_out"] is True
    )
