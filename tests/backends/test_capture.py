"""The bounded capture of a block's output (``backends._output``): what
it keeps of each stream, and that it holds a flood once, within its cap
(security issue 39: three buffers, each let grow to 1.25 times the cap,
then three texts, held a 1 MiB-capped flood about 5 times over)."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from execbox.backends._output import PART_COST, Capture

MIB = 1 << 20
CHUNK = b"x" * (1 << 16)  # a pipe's read


@contextmanager
def traced() -> Iterator[list[int]]:
    """[peak, now] bytes Python allocated inside the block, over what it held before."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    found = [0, 0]
    try:
        yield found
        now, peak = tracemalloc.get_traced_memory()
        found[:] = [peak - base, now - base]
    finally:
        tracemalloc.stop()


def flooded(cap: int, printed: int, stderr: bytes = b"") -> Capture:
    capture = Capture(cap)
    for _ in range(printed // len(CHUNK)):
        capture.feed("stdout", CHUNK)
    if stderr:
        capture.feed("stderr", stderr)
    return capture


def test_a_flood_is_held_once_while_it_comes_and_once_as_text() -> None:
    cap = 4 * MIB
    with traced() as fed:
        capture = flooded(cap, 64 * MIB)
    assert fed[0] < 1.1 * cap, f"feeding 64 MiB under a {cap}-byte cap held {fed[0]} bytes at its peak"
    with traced() as made:
        texts = (capture.combined.text(), capture.stdout.text(), capture.stderr.text())
    # the bytes are let go as the text grows: never both whole, and the one stream's text is the output
    assert made[0] < 1.2 * cap, f"making the texts held {made[0]} bytes at the peak (cap {cap})"
    assert texts[1] is texts[0] and texts[2] == ""
    assert capture.truncated and capture.stdout.total == 64 * MIB
    assert len(texts[0]) < cap + 200 and "bytes of output dropped" in texts[0]


def test_two_streams_are_held_once_and_their_texts_within_twice_the_cap() -> None:
    cap = 4 * MIB
    with traced() as fed:
        capture = flooded(cap, 64 * MIB, stderr=b"Traceback: the end\n")
    assert fed[0] < 1.1 * cap, fed
    with traced() as made:
        output, stdout, stderr = capture.combined.text(), capture.stdout.text(), capture.stderr.text()
    assert made[0] < 2.2 * cap, f"making the texts held {made[0]} bytes at the peak (cap {cap})"
    assert output.endswith("x\nTraceback: the end\n") or output.endswith("xTraceback: the end\n")
    assert stderr == "Traceback: the end\n" and not capture.stderr.truncated
    assert stdout.startswith("x") and stdout.endswith("x") and capture.stdout.truncated
    assert "Traceback" not in stdout and "bytes of output dropped" in stdout


def test_each_stream_keeps_its_bytes_of_the_head_and_the_tail_in_order() -> None:
    capture = Capture(100)
    for i in range(10):
        capture.feed("stdout", f"o{i}\n".encode())
        capture.feed("stderr", f"e{i}\n".encode())
    output, stdout, stderr = capture.combined.text(), capture.stdout.text(), capture.stderr.text()
    head, marker, tail = output.partition("\n[... ")
    assert head == "o0\n"  # a switch of stream costs PART_COST of the allowance: 75 bytes hold one part
    assert PART_COST > 75
    assert marker and tail.endswith("...]\ne9\n"), output
    assert stdout.startswith("o0\n\n[... ") and "e" not in stdout.replace("more", "").split("]")[-1]
    assert stderr.endswith("]\ne9\n") and "o" not in stderr.split("]")[-1]
    assert capture.stdout.total == capture.stderr.total == 30 and capture.combined.total == 60


def test_what_fits_is_kept_whole_in_arrival_order() -> None:
    capture = Capture(1 << 20)
    for i in range(3):
        capture.feed("stdout", f"out{i}\n".encode())
        capture.feed("stderr", f"err{i}\n".encode())
    assert capture.combined.text() == "".join(f"out{i}\nerr{i}\n" for i in range(3))
    assert capture.stdout.text() == "out0\nout1\nout2\n" and capture.stderr.text() == "err0\nerr1\nerr2\n"
    assert not capture.truncated and not capture.stdout.truncated


def test_a_character_split_between_reads_comes_whole() -> None:
    euro = "€".encode()
    capture = Capture(1 << 20)
    capture.feed("stdout", euro[:2])
    capture.feed("stderr", b"E")
    capture.feed("stdout", euro[2:] + b"\n")
    assert capture.stdout.text() == "€\n"
    assert capture.combined.text() == "E€\n"  # as on_output would have shown it, per stream


def test_alternating_one_byte_writes_keep_fewer_bytes_not_more_memory() -> None:
    cap = MIB // 8  # 131,072 writes: a per-write overhead of even 1 byte would show
    with traced() as held:
        capture = Capture(cap)
        for i in range(cap):
            capture.feed("stdout" if i % 2 else "stderr", b"x")
        text = capture.combined.text()
    assert held[0] < 1.3 * cap, f"{cap} alternating one-byte writes held {held[0]} bytes"
    assert capture.truncated and "bytes of output dropped" in text


def test_a_capture_whose_text_was_made_takes_no_more() -> None:
    capture = Capture(1000)
    capture.feed("stdout", b"done\n")
    assert capture.stdout.text() == "done\n"
    with pytest.raises(RuntimeError, match="takes no more output"):
        capture.feed("stdout", b"late\n")
