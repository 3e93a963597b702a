"""The sandbox's warm pool under load and faults: a burst of callers
leaves no backlog behind (the boxes made for it are let go once unused), a
zygote that stops answering is replaced while the block waits for a fresh
box, and no wait on the zygote is without a deadline."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor, StallError
from execbox.backends.sandbox import _pool, find_bwrap
from execbox.jail._sockets import receive_within, recv_fds_now, send_fds_now, send_within
from tests.conftest import require


def _need_bwrap() -> None:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found


def _tree(pid: int) -> list[int]:
    """pid and every descendant."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(_children(current))
    return out


def _cpu_ticks(pids: list[int]) -> int:
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total


def _zygote_pid(ex: SandboxExecutor) -> int:
    """The zygote itself: the child of the first zygote.py process in the
    jail (that one only waits for it); the boxes are the zygote's children."""
    assert ex._zygote is not None and ex._zygote._proc is not None
    for pid in _tree(ex._zygote._proc.pid):
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
            if any(arg.endswith(b"/zygote.py") for arg in argv[1:4]):  # python [-I] zygote.py, not bwrap
                (zygote,) = _children(pid)
                return zygote
    raise AssertionError("no zygote in the pool's jail")


@pytest.mark.alone  # it judges the jail's quiet after its own burst
def test_a_burst_of_callers_leaves_no_backlog(tmp_path):
    _need_bwrap()
    heavy = CodeBlock("python", "s=0\nfor i in range(100000): s+=i*i\nprint(s>0)")
    with SandboxExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=60)) as ex:
        assert ex.run(heavy).output == "True\n"
        jail = ex._zygote._proc.pid
        before = len(_tree(jail))
        with ThreadPoolExecutor(64) as pool:
            outputs = list(pool.map(lambda i: ex.run(CodeBlock("python", f"print({i})")).output, range(640)))
        assert outputs == [f"{i}\n" for i in range(640)]
        health = ex.pool_health
        assert health["boxes"] <= _pool.MAX_SIZE and health["boxes_asked"] <= health["boxes"], health
        assert health["blocks_running"] == 0 and health["stalls"] == 0, health
        # the boxes made for the burst are let go once unused (SPARE_IDLE_S), and the zygote is not
        # working through a backlog: within 20 s (a loaded CI machine: seen past 10 s once, right
        # after the Ray cluster's test), a second in which the jail holds no more processes than
        # before and spends at most 5 ticks of CPU (a backlog of 600 boxes would take minutes)
        deadline, quiet = time.monotonic() + 20, None
        while quiet is None and time.monotonic() < deadline:
            tree = _tree(jail)
            ticks = _cpu_ticks(tree)
            time.sleep(1.0)
            later = _tree(jail)
            if len(later) <= before + 2 and _cpu_ticks(later) - ticks <= 5:
                quiet = len(later)
        assert quiet is not None, (
            f"the pool's jail still works 20 s after the burst ({before} -> {len(later)})"
        )
        assert ex.pool_health["boxes"] == ex.pool_size, ex.pool_health
        assert ex.run(heavy).output == "True\n"


def test_a_killed_zygote_is_replaced_and_no_block_fails(tmp_path):
    _need_bwrap()
    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=2) as ex:
        assert ex.run(CodeBlock("python", "print(1)")).output == "1\n"
        ex.run(CodeBlock("python", "print(1)"))
        os.kill(ex._zygote._proc.pid, signal.SIGKILL)  # the jail, the zygote and every box go
        ex._zygote._proc.wait()
        results = [ex.run(CodeBlock("python", "print(2)")) for _ in range(4)]
        assert [(r.output, r.exit_code) for r in results] == [("2\n", 0)] * 4
        assert ex.pool_health["zygote_restarts"] == 1


def test_a_zygote_that_stops_answering_is_replaced(tmp_path, monkeypatch):
    _need_bwrap()
    monkeypatch.setattr(_pool, "UNIT_WAIT_S", 2.0)
    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=1, limits=Limits(timeout_s=10)) as ex:
        assert ex.run(CodeBlock("python", "print(1)")).output == "1\n"
        zygote = _zygote_pid(ex)
        os.kill(zygote, signal.SIGSTOP)  # alive, holding its socket, answering nothing
        try:
            started = time.monotonic()
            # the box is thrown away after this block (its /tmp changed): the next needs a new one
            outputs = [ex.run(CodeBlock("python", "import os\nos.chmod('/tmp', 0o700)\nprint(2)")).output]
            outputs += [ex.run(CodeBlock("python", "print(2)")).output for _ in range(2)]
            took = time.monotonic() - started
        finally:
            try:
                os.kill(zygote, signal.SIGCONT)
            except ProcessLookupError:
                pass
        assert outputs == ["2\n"] * 3
        health = ex.pool_health
        assert health["stalls"] == 1 and health["zygote_restarts"] == 1, health
        assert took < 2.0 + 10.0, took  # one wait for the stuck zygote, not a block's timeout per block
        assert _zygote_pid(ex) != zygote


def test_a_peer_that_does_not_read_or_answer_stalls_with_a_named_error():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        started = time.monotonic()
        with pytest.raises(StallError) as raised:
            for _ in range(100_000):  # fills the peer's queue, then waits 0.3 s at most
                send_within(ours, b"x" * 4096, [], time.monotonic() + 0.3, "the test's peer to read")
        assert raised.value.waiting_for == "the test's peer to read" and raised.value.retryable
        with pytest.raises(StallError, match="for a unit in vain"):
            receive_within(ours, time.monotonic() + 0.3, 64, 2, "a unit")
        assert time.monotonic() - started < 10


def test_a_peer_sending_more_descriptors_than_asked_is_refused():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    with ours, theirs:
        send_fds_now(theirs, b"unit", [0, 1, 2])
        before = len(os.listdir("/proc/self/fd"))
        with pytest.raises(OSError, match="more descriptors"):
            recv_fds_now(ours, 64, 2)
        assert len(os.listdir("/proc/self/fd")) == before  # none of them kept


def test_a_callers_thread_is_never_left_waiting(tmp_path, monkeypatch):
    """Twenty callers while the zygote is stuck: each returns (a result or
    StallError), none waits forever."""
    _need_bwrap()
    monkeypatch.setattr(_pool, "UNIT_WAIT_S", 1.0)
    with SandboxExecutor(workspace=tmp_path / "ws", pool_size=1, limits=Limits(timeout_s=10)) as ex:
        assert ex.run(CodeBlock("python", "print(1)")).output == "1\n"
        zygote = _zygote_pid(ex)
        os.kill(zygote, signal.SIGSTOP)
        answers: list[object] = []

        def call() -> None:
            try:
                answers.append(ex.run(CodeBlock("python", "print(3)")).output)
            except StallError as exc:
                answers.append(exc)

        threads = [threading.Thread(target=call) for _ in range(20)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        os.kill(zygote, signal.SIGCONT) if os.path.exists(f"/proc/{zygote}") else None
        assert not any(thread.is_alive() for thread in threads)
        assert len(answers) == 20 and answers.count("3\n") == 20, answers
