"""The line a block gets when it failed for want of the network that its
backend cut off: on the sandbox with the network off, never with it on, on
a block that succeeded, nor on the local backend (which has no switch)."""

from __future__ import annotations

import pytest

from execbox import CodeBlock, Limits, LocalExecutor, SandboxExecutor
from execbox._models import BlockResult
from execbox.backends._network_hint import NETWORK_OFF_NOTE, looks_like_no_network, with_network_hint
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

LOOKUP = CodeBlock("python", "import socket\nsocket.getaddrinfo('example.invalid', 80)")
REFUSED = CodeBlock("sh", "echo 'curl: (6) Could not resolve host: pypi.org' >&2; exit 6")


@pytest.mark.parametrize(
    "said",
    [
        "socket.gaierror: [Errno -3] Temporary failure in name resolution",
        "socket.gaierror: [Errno -2] Name or service not known",
        "ConnectionRefusedError: [Errno 111] Connection refused",
        "OSError: [Errno 101] Network is unreachable",
        "curl: (6) Could not resolve host: pypi.org",
        "Error: getaddrinfo ENOTFOUND registry.npmjs.org",
        "wget: unable to resolve host address 'example.com'",
    ],
)
def test_what_a_failed_lookup_or_connection_says(said):
    assert looks_like_no_network(f"Traceback...\n{said}\n")


def test_only_a_failed_block_with_the_network_off_where_it_is_enforced():
    failed = BlockResult(index=0, language="sh", status="failed", exit_code=6, output="Connection refused\n")
    enforced = frozenset({"network"})
    hinted = with_network_hint(failed, Limits(), lambda: enforced)
    assert (
        hinted.output == f"Connection refused\n{NETWORK_OFF_NOTE}\n"
        and hinted.stderr == NETWORK_OFF_NOTE + "\n"
    )
    assert with_network_hint(hinted, Limits(), lambda: enforced) == hinted  # once
    assert with_network_hint(failed, Limits(network=True), lambda: enforced) is failed
    assert with_network_hint(failed, Limits(), frozenset) is failed  # the backend has no switch
    ok = BlockResult(index=0, language="sh", status="ok", exit_code=0, output="Connection refused\n")
    assert with_network_hint(ok, Limits(), lambda: enforced) is ok
    other = BlockResult(index=0, language="sh", status="failed", exit_code=1, output="ValueError: x\n")
    assert with_network_hint(other, Limits(), lambda: enforced) is other


def test_on_the_sandbox_and_the_local_backend(tmp_path):
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    with SandboxExecutor(workspace=tmp_path / "s") as sandbox:
        off = sandbox.run(LOOKUP)
        curl = sandbox.run(REFUSED)
    assert off.exit_code == 1 and off.output.endswith(NETWORK_OFF_NOTE + "\n")
    assert off.blocks[0].stderr.endswith(NETWORK_OFF_NOTE + "\n")
    assert curl.exit_code == 6 and curl.to_text().rstrip().endswith(NETWORK_OFF_NOTE)
    with SandboxExecutor(workspace=tmp_path / "n", limits=Limits(network=True)) as sandbox:
        on = sandbox.run(LOOKUP)
    assert on.exit_code == 1 and NETWORK_OFF_NOTE not in on.output
    with LocalExecutor(workspace=tmp_path / "l") as local:
        here = local.run(LOOKUP)
    assert here.exit_code == 1 and NETWORK_OFF_NOTE not in here.output
