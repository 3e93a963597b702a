"""Network: nothing reaches the host or the outside unless Limits(network=True)."""

from __future__ import annotations

import secrets
import socket
import threading

import pytest

from tests.security.conftest import not_for, run_then_healthy


class TcpServer:
    """A TCP server on the host that records every connection it accepts."""

    def __init__(self, family: int = socket.AF_INET, host: str = "127.0.0.1") -> None:
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[object] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, peer = self.sock.accept()
            except OSError:
                continue
            self.accepted.append(peer)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


@pytest.fixture
def tcp_server():
    server = TcpServer()
    yield server
    server.close()


def _host_address() -> str:
    """This host's address on its default route (no packet is sent)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.1", 9))
        return probe.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()


CONNECT = """
import socket
try:
    socket.create_connection(({host!r}, {port}), timeout=3)
    print("CONNECTED")
except OSError as exc:
    print("failed", type(exc).__name__, exc)
"""


def test_tcp_to_host_loopback_is_refused(hostile, tcp_server):
    result = run_then_healthy(hostile, "python", CONNECT.format(host="127.0.0.1", port=tcp_server.port))
    assert "CONNECTED" not in result.output
    assert "failed" in result.output
    assert tcp_server.accepted == []


def test_tcp_to_host_address_is_refused(hostile):
    address = _host_address()
    server = TcpServer(host="0.0.0.0")
    try:
        result = run_then_healthy(hostile, "python", CONNECT.format(host=address, port=server.port))
    finally:
        server.close()
    assert "CONNECTED" not in result.output
    assert server.accepted == []


def test_tcp_to_host_ipv6_loopback_is_refused(hostile):
    try:
        server = TcpServer(socket.AF_INET6, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback on this host")
    try:
        result = run_then_healthy(hostile, "python", CONNECT.format(host="::1", port=server.port))
    finally:
        server.close()
    assert "CONNECTED" not in result.output
    assert server.accepted == []


def test_internet_is_unreachable(hostile):
    result = run_then_healthy(hostile, "python", CONNECT.format(host="1.1.1.1", port=53))
    assert "CONNECTED" not in result.output
    assert "failed" in result.output


def test_dns_does_not_resolve(hostile):
    code = (
        "import socket\ntry:\n    print('RESOLVED', socket.getaddrinfo('example.com', 80))\n"
        "except OSError as exc:\n    print('failed', type(exc).__name__)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "RESOLVED" not in result.output
    assert "failed" in result.output


def test_udp_to_host_loopback_does_not_arrive(hostile):
    receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    receiver.bind(("127.0.0.1", 0))
    receiver.settimeout(1.0)
    port = receiver.getsockname()[1]
    payload = secrets.token_hex(8)
    code = (
        f"import socket\ntry:\n    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        f"except OSError as exc:\n    print('failed', exc)\n    raise SystemExit\n"
        f"for _ in range(20):\n    try:\n        s.sendto({payload!r}.encode(), ('127.0.0.1', {port}))\n"
        f"    except OSError as exc:\n        print('failed', exc)\n        break\nprint('sent')\n"
    )
    try:
        result = run_then_healthy(hostile, "python", code)
        received = []
        try:
            while True:
                received.append(receiver.recv(100))
        except TimeoutError:
            pass
    finally:
        receiver.close()
    assert "sent" in result.output or "failed" in result.output
    assert received == []


def test_abstract_unix_socket_of_the_host_is_unreachable(hostile):
    # Abstract unix sockets belong to the network namespace, not the filesystem.
    name = f"\0execbox-test-{secrets.token_hex(8)}"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(name)
    server.listen(1)
    server.settimeout(1.0)
    code = (
        f"import socket\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect({name!r})\n"
        f"    print('CONNECTED')\nexcept OSError as exc:\n    print('failed', exc)\n"
    )
    try:
        result = run_then_healthy(hostile, "python", code)
        try:
            server.accept()
            accepted = True
        except TimeoutError:
            accepted = False
    finally:
        server.close()
    assert "CONNECTED" not in result.output
    assert not accepted


@pytest.mark.parametrize(
    "family, kind, proto",
    [
        ("AF_INET", "SOCK_RAW", 1),  # raw ICMP
        ("AF_INET", "SOCK_RAW", 255),  # raw IP
        ("AF_PACKET", "SOCK_RAW", 0x0300),  # every ethernet frame (ETH_P_ALL, network order)
    ],
    ids=["raw-icmp", "raw-ip", "packet"],
)
def test_raw_and_packet_sockets_are_refused(hostile, family, kind, proto):
    code = (
        f"import socket\ntry:\n    socket.socket(socket.{family}, socket.{kind}, {proto})\n    print('OPENED')\n"
        f"except OSError as exc:\n    print('failed', exc.errno)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "OPENED" not in result.output
    assert "failed" in result.output


def test_only_loopback_interface_exists(mode, hostile):
    not_for(
        mode,
        "landlock",
        "no network namespace in this tier: the host's interfaces are listed in "
        "/proc/net (its netlink sockets are refused)",
    )
    result = run_then_healthy(
        hostile, "python", "import socket\nprint(sorted(n for _, n in socket.if_nameindex()))"
    )
    assert result.exit_code == 0, result.output
    assert eval(result.output) == ["lo"]


# The sockets of the container engine, the system bus and a database: root on
# the host for the first ones, whatever they serve for the others.
HOST_SOCKETS = [
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/var/run/docker/containerd/containerd.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/postgresql/.s.PGSQL.5432",
]


def test_host_unix_sockets_are_unreachable(hostile):
    # the socket is made inside the try: the Landlock tier refuses unix stream sockets outright
    code = (
        f"import socket\nfor path in {HOST_SOCKETS!r}:\n    try:\n"
        "        with socket.socket(socket.AF_UNIX) as s:\n            s.connect(path)\n"
        "            print('CONNECTED', path)\n    except OSError as exc:\n"
        "        print('failed', path, exc.errno)\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert result.exit_code == 0, result.output
    assert "CONNECTED" not in result.output
    assert result.output.count("failed") == len(HOST_SOCKETS)
