"""One line for a block that failed because the network is off.

A block that runs ``pip install`` or fetches a URL where the backend cuts
the network off fails with the resolver's or the socket's words ("Temporary
failure in name resolution", "Connection refused"), which do not say that
the sandbox has no network. When such a block failed and its output shows a
failed name lookup or connection, its result gets ``NETWORK_OFF_NOTE``: the
model (or the person) reads that the network is off and which setting turns
it on. Only where the backend enforces the network switch (the sandbox,
docker, a jailed kernel: ``"network"`` among its capabilities' ``enforced``)
and the block's ``Limits.network`` is not True; never for a block that
succeeded. No I/O.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from collections.abc import Set as AbstractSet

from .._models import BlockResult, Limits

__all__ = ["NETWORK_OFF_NOTE", "looks_like_no_network", "with_network_hint"]

NETWORK_OFF_NOTE = (
    "execbox: the network is off for this block; Limits(network=True) "
    "(--network on the command line) turns it on."
)

# What resolvers, sockets and the usual clients (Python, pip, requests, curl,
# wget, Node, Go) say when a name cannot be looked up or a connection is refused.
_NO_NETWORK = re.compile(
    r"Temporary failure in name resolution|Name or service not known|"
    r"No address associated with hostname|nodename nor servname|getaddrinfo|"
    r"Could not resolve host|Failed to resolve|NameResolutionError|unable to resolve host|"
    r"Connection refused|Network is unreachable|No route to host|"
    r"ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ENETUNREACH|"
    r"dial tcp: lookup|server misbehaving",
    re.IGNORECASE,
)
# the end of a block's output is where the failure is said; a huge output is not scanned whole
_SCANNED = 64 * 1024
_FAILED = ("failed", "timeout")


def looks_like_no_network(output: str) -> bool:
    """Whether ``output`` shows a failed name lookup or connection."""
    return bool(_NO_NETWORK.search(output[-_SCANNED:]))


def with_network_hint(
    result: BlockResult, limits: Limits, enforced: Callable[[], AbstractSet[str]]
) -> BlockResult:
    """``result`` with ``NETWORK_OFF_NOTE`` added to its output and stderr
    when the block failed for want of a network that is off: ``limits`` not
    asking for one and ``enforced()`` (the backend's enforced limits, asked
    only then) holding the switch. Else ``result`` itself."""
    if (
        result.status not in _FAILED
        or result.exit_code == 0
        or limits.network is True
        or NETWORK_OFF_NOTE in result.output
        or not looks_like_no_network(result.output)
        or "network" not in enforced()
    ):
        return result
    return dataclasses.replace(result, output=_add_line(result.output), stderr=_add_line(result.stderr))


def _add_line(text: str) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + NETWORK_OFF_NOTE + "\n"
