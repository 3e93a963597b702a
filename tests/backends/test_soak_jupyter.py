"""Soak of the jailed Jupyter kernel (``tests/_soak.py`` says what a soak
drives and asserts): bursts from 64 threads of good blocks beside blocks
that time out (1 s), crash or kill their kernel (os._exit, a segfault,
``kill -9 -1``), flood their output and are cancelled. A kernel runs one
cell at a time: the calls of a burst queue for it, so a call's deadline is
the burst's (each hostile block costs an interrupt or a new kernel). Also:
no process, descriptor, workspace or kernel folder is left once the
executor closes."""

from __future__ import annotations

import importlib.util
import os

from execbox import JupyterExecutor, Limits
from execbox.backends.jupyter import _cell, _channels
from execbox.backends.jupyter._recovery import INTERRUPT_GRACE_S
from execbox.backends.sandbox import find_bwrap
from tests._soak import FAST, assert_healthy, descendants, fds, soak
from tests.conftest import require

TIMEOUT_S = 1.0
# Longer than every timer of the kernel's executor in the full run (a silent kernel is stalled after
# ANSWER_S; sends time out after SEND_TIMEOUT_S; an interrupt is waited for INTERRUPT_GRACE_S); the
# fast run waits past all but the first two
GAP_S = (INTERRUPT_GRACE_S if FAST else max(_cell.ANSWER_S, _channels.SEND_TIMEOUT_S)) + 1.0
assert max(INTERRUPT_GRACE_S, _cell.REPLY_GRACE_S, _cell.POLL_S) < GAP_S
# A crash takes the kernel with it: the block reports its death (137), and runs in a new kernel
EXPECT = {"crash": lambda r: r.exit_code == 137 and r.error is not None and r.error.name == "KernelDied"}
# 64 threads queue for one kernel: the last of a burst waits for every block before it, each
# hostile one an interrupt or a new kernel (~2 s here, loaded): the burst's length, with room
BURST = 20 if FAST else 40
CALL_DEADLINE_S = 90.0


def test_soak():
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel", "zmq"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    import zmq

    # the process's ZMQ context outlives executors: its I/O threads and their descriptors start with
    # its first socket
    zmq.Context.instance().socket(zmq.DEALER).close(linger=0)
    children, before_fds = descendants(), fds()
    executor = JupyterExecutor(kernel="sandbox", warm_kernels=0, limits=Limits(timeout_s=TIMEOUT_S))
    workspace = executor.workspace.path  # its own, temporary: removed by close()
    runtimes = set()
    with executor:
        seen = soak(
            executor,
            timeout_s=TIMEOUT_S,
            gap_s=GAP_S,
            burst=BURST,
            rounds=1 if FAST else 2,
            expect=EXPECT,
            call_deadline_s=CALL_DEADLINE_S,
        )
        runtimes.add(executor._kernel._runtime)  # the kernel's socket folder on the host
    print(seen)  # shown with -s, or when an assertion fails
    assert_healthy(seen)
    assert not workspace.exists(), "the executor's workspace outlived close()"
    assert not [r for r in runtimes if os.path.exists(r)], "the kernel's folder outlived close()"
    assert descendants() <= children, "a process of the executor outlived close()"
    assert fds() <= before_fds, "a descriptor of the executor outlived close()"
