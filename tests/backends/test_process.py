"""``backends/_process``: one command to completion, with real processes.

The backends test it end to end; these pin its own promises: the exit code
(124 on timeout, 128+N for a signal), everything the command started killed
when it ends, times out or is cancelled (its group, and what carries its
token after leaving the group), the bounded capture saying what it dropped,
the two streams kept in arrival order, and cancellation mid-run keeping what
was printed before it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from execbox.backends._process import TOKEN_VAR, Cancellation, kill_marked, new_token, run_process

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def run(script: str, cwd: Path, **options):
    options.setdefault("timeout_s", 20.0)
    options.setdefault("output_limit", 1 << 20)
    return run_process(["/bin/sh", "-c", script], cwd=str(cwd), env=ENV, **options)


def alive(pid: int) -> bool:
    """Running (a zombie waiting for its reaper does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")


def pids_in(path: Path) -> list[int]:
    end = time.monotonic() + 5
    while time.monotonic() < end:
        text = path.read_text() if path.exists() else ""
        if text.endswith("\n"):
            return [int(word) for word in text.split()]
        time.sleep(0.01)
    raise AssertionError(f"{path} was never written")


def gone(pids: list[int], within: float = 3.0) -> bool:
    end = time.monotonic() + within
    while any(alive(pid) for pid in pids):
        if time.monotonic() > end:
            return False
        time.sleep(0.02)
    return True


def test_exit_code_and_both_streams(tmp_path):
    outcome = run("echo out; echo err >&2; exit 3", tmp_path)
    assert outcome.exit_code == 3
    assert not outcome.timed_out and not outcome.cancelled
    assert outcome.capture.stdout.text() == "out\n"
    assert outcome.capture.stderr.text() == "err\n"
    assert not outcome.capture.truncated


def test_death_by_signal_is_128_plus_n(tmp_path):
    assert run("kill -TERM $$", tmp_path).exit_code == 128 + 15


def test_timeout_kills_the_command_and_everything_it_started(tmp_path):
    # a child in the group, and a daemon that left it (setsid) but keeps the token
    script = (
        "sleep 300 & echo $! >pids; setsid sleep 301 & echo $! >>pids; echo >>pids; echo partial; sleep 300"
    )
    started = time.monotonic()
    outcome = run(script, tmp_path, timeout_s=1.0)
    took = time.monotonic() - started
    assert outcome.timed_out and outcome.exit_code == 124
    assert 1.0 <= took < 5.0, took
    assert outcome.capture.stdout.text() == "partial\n"  # what came before the deadline is kept
    assert gone(pids_in(tmp_path / "pids"))


def test_a_daemon_that_holds_the_pipes_does_not_keep_the_run_waiting(tmp_path):
    # the command exits at once; its daemon keeps stdout open: killed when the command ends
    script = "setsid sleep 300 & echo $! >pids; echo >>pids; echo done"
    started = time.monotonic()
    outcome = run(script, tmp_path)
    assert time.monotonic() - started < 3.0
    assert outcome.exit_code == 0 and not outcome.timed_out
    assert outcome.capture.stdout.text() == "done\n"
    assert gone(pids_in(tmp_path / "pids"))


def test_a_command_that_closes_its_output_is_still_waited_for(tmp_path):
    outcome = run("exec >&- 2>&-; sleep 0.5; exit 7", tmp_path)
    assert outcome.exit_code == 7
    assert outcome.duration_s >= 0.5


def test_kill_marked_finds_processes_by_their_token_alone(tmp_path):
    token = new_token()
    # its own session, not our child's group: only the token in its environment marks it
    proc = subprocess.Popen(["sleep", "300"], env={**ENV, TOKEN_VAR: token}, start_new_session=True)
    other = subprocess.Popen(["sleep", "300"], env={**ENV, TOKEN_VAR: new_token()}, start_new_session=True)
    try:
        assert kill_marked(token) >= 1  # (a killed process not yet reaped may be counted again)
        assert proc.wait(timeout=5) == -9
        assert other.poll() is None  # another run's token is spared
    finally:
        for p in (proc, other):
            p.kill()
            p.wait()


def test_output_beyond_the_limit_is_cut_and_says_so(tmp_path):
    script = f"{sys.executable} -c \"print('HEAD' + 'x' * 200000); print('TAIL')\""
    outcome = run(script, tmp_path, output_limit=1000)
    assert outcome.exit_code == 0
    cap = outcome.capture
    assert cap.truncated and cap.stdout.total == 200010
    text = cap.combined.text()
    assert text.startswith("HEAD") and text.endswith("TAIL\n")  # the head and the tail survive the cut
    assert "bytes of output dropped" in text and "Limits.max_output_bytes=1000" in text
    assert len(text) < 1000 + 200


def test_a_flood_is_read_to_the_end_without_holding_it(tmp_path):
    # 64 MB through a 64 KiB allowance: the run finishes, holding a bounded amount
    outcome = run("head -c 67108864 /dev/zero", tmp_path, output_limit=1 << 16)
    assert outcome.exit_code == 0
    assert outcome.capture.stdout.total == 1 << 26
    assert len(outcome.capture.stdout.text()) < (1 << 16) + 300


def test_streams_interleave_in_arrival_order(tmp_path):
    script = "for i in 1 2 3; do echo out$i; sleep 0.05; echo err$i >&2; sleep 0.05; done"
    seen: list[tuple[str, str]] = []
    outcome = run(script, tmp_path, on_output=lambda stream, text: seen.append((stream, text)))
    expected = "out1\nerr1\nout2\nerr2\nout3\nerr3\n"
    assert outcome.capture.combined.text() == expected
    assert "".join(text for _, text in seen) == expected
    assert [stream for stream, _ in seen] == ["stdout", "stderr"] * 3


def test_the_callback_gets_whole_characters(tmp_path):
    # "é" is two bytes in UTF-8, written apart: the callback never sees half of it
    script = "printf '\\303'; sleep 0.1; printf '\\251\\n'"
    seen: list[str] = []
    outcome = run(script, tmp_path, on_output=lambda _stream, text: seen.append(text))
    assert "".join(seen) == "é\n" and "\ufffd" not in "".join(seen)
    assert outcome.capture.stdout.text() == "é\n"


def test_cancellation_mid_run_kills_and_keeps_the_output_so_far(tmp_path):
    cancel = Cancellation()
    try:

        def on_output(_stream: str, text: str) -> None:
            if "started" in text:
                threading.Timer(0.1, cancel.cancel).start()

        script = "sleep 300 & echo $! >pids; echo >>pids; echo started; sleep 300"
        began = time.monotonic()
        outcome = run(script, tmp_path, cancel=cancel, on_output=on_output)
        assert time.monotonic() - began < 5.0
        assert outcome.cancelled and not outcome.timed_out
        assert outcome.capture.stdout.text() == "started\n"
        assert gone(pids_in(tmp_path / "pids"))
    finally:
        cancel.close()


def test_cancelled_before_it_starts(tmp_path):
    cancel = Cancellation()
    cancel.cancel()
    try:
        outcome = run("echo never >ran; sleep 300", tmp_path, cancel=cancel)
        assert outcome.cancelled and not outcome.timed_out
        assert outcome.duration_s < 5.0
    finally:
        cancel.close()


def test_the_memory_limit_holds_from_the_first_instruction(tmp_path):
    # The limit is set in the child before its exec: a program that allocates
    # at once cannot get ahead of it (set from outside after the start, it
    # sometimes did under load).
    def python(code: str):
        return run_process(
            [sys.executable, "-c", code],
            cwd=str(tmp_path),
            env=ENV,
            timeout_s=20.0,
            output_limit=1 << 20,
            memory_mb=300,
        )

    for _ in range(5):
        done = python("blob = bytearray(600 * 1024 * 1024)\nprint('allocated')")
        assert done.exit_code != 0 and "allocated" not in done.capture.stdout.text()
        assert "MemoryError" in done.capture.stderr.text()
    fits = python("blob = bytearray(20 * 1024 * 1024)\nprint('allocated')")
    assert fits.exit_code == 0 and fits.capture.stdout.text() == "allocated\n"
