"""`execbox serve --allow-network`: a request's block with the network on
reaches the internet, not the machine the service runs on, whose loopback
holds the service itself (and, beside it, whatever else listens there:
Ray's control plane, a tokenless Jupyter server, a database).

The remote executor on a real server on loopback, as a user of the service
calls it; the rows of the hostile battery's network section
(tests/security/test_network.py) that the service adds something to.
"""

from __future__ import annotations

import urllib.parse

import pytest

from execbox import CodeBlock, Limits, create_executor
from tests.conftest import require_namespaces
from tests.security.test_network import (
    CONNECT,
    FETCH,
    TcpServer,
    _host_addresses,
    reachable_package_index,
)
from tests.server._http import shared_server

SERVER = ("--backend", "sandbox", "--allow-network")
NETWORK_ON = Limits(network=True, timeout_s=30)


@pytest.fixture
def remote(tmp_path):
    require_namespaces()  # the network on needs the namespaces tier (the Landlock tier refuses it)
    server = shared_server(*SERVER)
    executor = create_executor(
        "remote", url=server.url, token=server.token, workspace=tmp_path / "ws", limits=NETWORK_ON
    )
    with executor:
        yield server, executor


def _run(executor, code: str) -> str:
    result = executor.run(CodeBlock("python", code))
    return result.output


def test_a_block_does_not_reach_the_service_nor_the_hosts_loopback(remote):
    server, executor = remote
    service = urllib.parse.urlsplit(server.url)
    listener = TcpServer()
    try:
        for host, port in ((service.hostname, service.port), ("127.0.0.1", listener.port)):
            said = _run(executor, CONNECT.format(host=host, port=port))
            assert "CONNECTED" not in said, (host, port, said)
            assert "failed" in said, (host, port, said)
    finally:
        listener.close()
    assert listener.accepted == []


def test_a_block_does_not_reach_the_hosts_own_addresses(remote):
    _, executor = remote
    listener = TcpServer(host="0.0.0.0")
    try:
        for address in _host_addresses():
            said = _run(executor, CONNECT.format(host=address, port=listener.port))
            assert "CONNECTED" not in said and "failed" in said, (address, said)
    finally:
        listener.close()
    assert listener.accepted == []


def test_a_block_reaches_the_package_index(remote):
    url = reachable_package_index()
    _, executor = remote
    said = _run(executor, FETCH.format(url=url))
    assert "STATUS 200 True" in said, said
