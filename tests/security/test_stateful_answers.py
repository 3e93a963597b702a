"""A stateful session's block holds the session's socket (they are one
process), so every answer the host reads is the block's to forge: an fd
that is not a sealed memfd, JSON that recurses without end, a "full" that
would run the block twice, words the session never says. Each must end as
a result naming what was wrong, within the block's timeout, with the
executor still usable."""

from __future__ import annotations

import time

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

FIND_SOCKET = """
import os, socket, stat
def session_socket():
    for name in os.listdir('/proc/self/fd'):
        fd = int(name)
        try:
            if stat.S_ISSOCK(os.fstat(fd).st_mode):
                s = socket.socket(fileno=os.dup(fd))
                if s.type == socket.SOCK_SEQPACKET:
                    return s
        except OSError:
            pass
    raise SystemExit('no socket')
sock = session_socket()
"""

# the nonce of the request the block runs for, dug out of the session's frames (the block
# and the session are one interpreter: what ties an answer to its request is not a secret)
DIG_NONCE = """
import sys
frame, nonce = sys._getframe(), None
while frame is not None and nonce is None:
    for value in list(frame.f_locals.values()):
        if isinstance(value, dict) and isinstance(value.get('nonce'), str):
            nonce = value['nonce']
    frame = frame.f_back
"""

# the answer as the session gives it, for this request
EXIT_0 = "b'exit 0 ' + nonce.encode()"
ATTEMPTS = {
    "an_eventfd_for_displays": FIND_SOCKET
    + DIG_NONCE
    + f"socket.send_fds(sock, [{EXIT_0}], [os.eventfd(0)])\n",
    "a_pipe_for_displays": FIND_SOCKET
    + DIG_NONCE
    + f"r, w = os.pipe()\nsocket.send_fds(sock, [{EXIT_0}], [r])\n",
    "deep_json_displays": FIND_SOCKET
    + DIG_NONCE
    + (
        "fd = os.memfd_create('d', os.MFD_ALLOW_SEALING)\nos.write(fd, b'[' * 200000)\n"
        "import fcntl\nfcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | "
        "fcntl.F_SEAL_WRITE)\n"
        f"socket.send_fds(sock, [{EXIT_0}], [fd])\n"
    ),
    "an_unsealed_memfd": FIND_SOCKET
    + DIG_NONCE
    + f"fd = os.memfd_create('d')\nos.write(fd, b'[]')\nsocket.send_fds(sock, [{EXIT_0}], [fd])\n",
}


@pytest.fixture
def stateful(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with SandboxExecutor(workspace=tmp_path / "ws", stateful=True, limits=Limits(timeout_s=5)) as ex:
        yield ex


@pytest.mark.parametrize("attempt", sorted(ATTEMPTS))
def test_a_forged_display_handover_is_refused_by_name(stateful, attempt):
    started = time.monotonic()
    result = stateful.run(CodeBlock("python", ATTEMPTS[attempt] + "import time\ntime.sleep(0.3)\n"))
    assert time.monotonic() - started < 5 + 5, "the host waited past the block's timeout"
    assert "the displays handed over were refused" in result.output, result.output
    time.sleep(0.5)  # the session's own answer to that block arrives and is dropped before the next
    assert stateful.run(CodeBlock("python", "print('still usable')")).output.endswith("still usable\n")


def test_a_forged_full_does_not_run_the_block_twice(stateful, tmp_path):
    code = FIND_SOCKET + (
        "open('runs.txt', 'a').write('ran\\n')\nsock.send(b'full')\nimport time\ntime.sleep(0.3)\n"
    )
    result = stateful.run(CodeBlock("python", code))
    assert (tmp_path / "ws" / "runs.txt").read_text() == "ran\n"
    assert result.exit_code != 0 and "wrote on its session's socket" in result.output, result.output
    assert stateful.run(CodeBlock("python", "print(1 + 1)")).output.endswith("2\n")


def test_words_the_session_never_says_end_it(stateful):
    result = stateful.run(
        CodeBlock("python", FIND_SOCKET + "sock.send(b'exit 0 and more')\nimport time\ntime.sleep(0.3)\n")
    )
    assert result.exit_code != 0 and "never sends" in result.output, result.output
    assert stateful.run(CodeBlock("python", "print('fresh')")).output.endswith("fresh\n")


# the answer, then the block's output closed: the host takes the block as over
OVER = "null = os.open('/dev/null', os.O_WRONLY)\nos.dup2(null, 1)\nos.dup2(null, 2)\n"
EARLY_ANSWERS = {
    "bare": FIND_SOCKET + "sock.send(b'exit 0')\n" + OVER,
    "with_its_own_nonce": FIND_SOCKET + DIG_NONCE + f"sock.send({EXIT_0})\n" + OVER,
}


@pytest.mark.parametrize("answer", sorted(EARLY_ANSWERS))
def test_a_forged_early_answer_never_hands_a_block_another_ones_result(stateful, answer):
    """Security issue 39: a block that answered for itself (and closed its
    output) ended early; its true answer (exit code, displays) then came as
    the next block's, and later blocks got each other's. Each answer is tied
    to its request now: a block gets its own result, or an error that says
    the session was out of step (and the next block a fresh session)."""
    forging = EARLY_ANSWERS[answer] + "import time\ntime.sleep(1.0)\nraise SystemExit(99)\n"
    stateful.run(CodeBlock("python", forging))
    results = [
        stateful.run(
            CodeBlock(
                "python", f"import time\ntime.sleep(0.2)\nprint('block {n}')\nraise SystemExit({n + 3})"
            )
        )
        for n in range(4)
    ]
    for n, result in enumerate(results):
        said = (n, [(r.exit_code, r.output) for r in results])
        if "out of step" in result.output:
            assert result.error is not None and result.error.name == "SessionDied", said
        else:
            assert result.exit_code == n + 3 and result.output.endswith(f"block {n}\n"), said
    assert results[-1].exit_code == 6 and results[-1].output == "block 3\n", results[-1].output


def test_displays_past_the_cap_are_dropped_in_the_jail_and_read_within_it(stateful):
    """A block's displays are bounded by its ``Limits.max_output_bytes`` (1 MiB
    here) where they are made: a last expression whose repr is 3.6 MB as
    JSON is dropped by the session and said so, the host reads no more than
    the cap and a little (security issue 39), and a display that fits comes."""
    result = stateful.run(CodeBlock("python", "print('made')\n'é' * (600 << 10)"))
    assert "[1 display dropped: a block keeps at most Limits.max_output_bytes" in result.output, (
        result.output[-500:]
    )
    assert "refused" not in result.output and result.displays == ()
    small = stateful.run(CodeBlock("python", "6 * 7"))
    assert [(d.mime_type, d.data) for d in small.displays] == [("text/plain", "42")]
