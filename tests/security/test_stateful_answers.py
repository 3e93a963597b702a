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

ATTEMPTS = {
    "an_eventfd_for_displays": FIND_SOCKET + "socket.send_fds(sock, [b'exit 0'], [os.eventfd(0)])\n",
    "a_pipe_for_displays": FIND_SOCKET + "r, w = os.pipe()\nsocket.send_fds(sock, [b'exit 0'], [r])\n",
    "deep_json_displays": FIND_SOCKET
    + (
        "fd = os.memfd_create('d', os.MFD_ALLOW_SEALING)\nos.write(fd, b'[' * 200000)\n"
        "import fcntl\nfcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | "
        "fcntl.F_SEAL_WRITE)\nsocket.send_fds(sock, [b'exit 0'], [fd])\n"
    ),
    "an_unsealed_memfd": FIND_SOCKET
    + ("fd = os.memfd_create('d')\nos.write(fd, b'[]')\nsocket.send_fds(sock, [b'exit 0'], [fd])\n"),
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
