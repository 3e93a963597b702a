"""Network: nothing reaches the host or the outside unless Limits(network=True),
and with it the internet, never this machine (its loopback, its addresses,
link-local: the sandbox's egress namespace, jail/_egress.py; the
Docker container's routing rules, backends/docker/_agent/egress.py)."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from execbox import BackendUnavailableError, CodeBlock, Workspace
from tests.security.conftest import DOCKER_MODES, LIMITS, MODES, REQUIRES, not_for, run_then_healthy


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


# ---- the network on: the internet, not this machine ----

NETWORK_ON = LIMITS.replace(network=True, timeout_s=30)
# what the Landlock tier says for the network on: it has no namespace to keep a block from the host
LANDLOCK_REFUSES = r"network=True\) needs the namespaces tier"
# what the Docker backend says under gVisor: its netstack has no routing rules to keep a block from the host
GVISOR_REFUSES = r"gVisor's network stack has no routing rules"


def _network_on(mode, make_hostile):
    """An executor of ``mode`` with the network on; the Landlock tier and
    Docker under gVisor refuse one (checked here)."""
    refuses = {"landlock": LANDLOCK_REFUSES, "docker-gvisor": GVISOR_REFUSES}
    if mode in refuses:
        with pytest.raises(BackendUnavailableError, match=refuses[mode]):
            make_hostile(NETWORK_ON)
        pytest.skip(f"not for {mode}: it refuses the network on (checked above)")
    return make_hostile(NETWORK_ON)


def package_index() -> str:
    """The page of pip on the package index pip is configured with (its
    http(s) index-url or extra-index-url), else on pypi.org."""
    urls = [os.environ.get("PIP_INDEX_URL", ""), *os.environ.get("PIP_EXTRA_INDEX_URL", "").split()]
    try:
        listed = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.SubprocessError):
        listed = ""
    for line in listed.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(("index-url", "extra-index-url")):
            urls += value.strip("'\"").split()
    index = next((u for u in urls if u.startswith(("http://", "https://"))), "https://pypi.org/simple")
    return index.rstrip("/") + "/pip/"


FETCH = """
import ssl, urllib.request
try:
    with urllib.request.urlopen({url!r}, timeout=20) as page:
        print("STATUS", page.status, b"pip" in page.read(1 << 20))
except OSError as exc:
    untrusted = isinstance(getattr(exc, "reason", exc), ssl.SSLCertVerificationError)
    print("UNTRUSTED" if untrusted else "failed", type(exc).__name__, exc)
"""


def reachable_package_index() -> str:
    """``package_index()``, after checking this host itself fetches it
    (else the test skips, saying so)."""
    url = package_index()
    try:
        with urllib.request.urlopen(url, timeout=20) as page:
            page.read(1 << 20)
    except OSError as exc:
        pytest.skip(f"this host itself cannot fetch {url} ({exc})")
    return url


def test_network_on_reaches_the_package_index(mode, make_hostile):
    url = reachable_package_index()
    executor = _network_on(mode, make_hostile)
    result = run_then_healthy(executor, "python", FETCH.format(url=url))
    if mode in DOCKER_MODES and result.output.startswith("UNTRUSTED"):
        # the index answered, with a certificate the image's CA store lacks (the host's is not the image's)
        return
    assert "STATUS 200 True" in result.output, result.output


def test_network_on_does_not_reach_the_hosts_loopback(mode, make_hostile, tcp_server):
    executor = _network_on(mode, make_hostile)
    # 10.0.2.2: slirp4netns's gateway, the host's loopback unless --disable-host-loopback
    for host in ("127.0.0.1", "10.0.2.2"):
        result = run_then_healthy(executor, "python", CONNECT.format(host=host, port=tcp_server.port))
        assert "CONNECTED" not in result.output, host
        assert "failed" in result.output, host
    assert tcp_server.accepted == []


def _host_addresses() -> list[str]:
    """Every IPv4 address of this host's interfaces (its default route's first)."""
    from execbox._netlink import host_addresses

    found = [a for a in host_addresses() if ":" not in a and not a.startswith("127.")]
    return list(dict.fromkeys([_host_address(), *found]))


def test_network_on_does_not_reach_the_hosts_own_addresses(mode, make_hostile):
    server = TcpServer(host="0.0.0.0")
    try:
        executor = _network_on(mode, make_hostile)
        for address in _host_addresses():
            result = run_then_healthy(executor, "python", CONNECT.format(host=address, port=server.port))
            assert "CONNECTED" not in result.output, address
            assert "failed" in result.output, address
    finally:
        server.close()
    assert server.accepted == []


UNREACHABLE = """
import errno, socket
try:
    socket.create_connection(("169.254.169.254", 80), timeout=3)
    print("CONNECTED")
except OSError as exc:
    print("failed", errno.errorcode.get(exc.errno, exc.errno))
"""


def test_network_on_has_no_route_to_link_local(mode, make_hostile):
    # the cloud metadata endpoint, which hands out the machine's credentials: refused at once (no
    # route), not left to time out where a real one would have answered
    executor = _network_on(mode, make_hostile)
    result = run_then_healthy(executor, "python", UNREACHABLE)
    assert "CONNECTED" not in result.output
    refused = {errno.errorcode[e] for e in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.EACCES, errno.EPERM)}
    assert result.output.split()[-1] in refused, result.output


# A block that tries to take the rules away: every IPv4 rule from priority 0 to 399, and IPv6's, deleted
# by route netlink (RTM_DELRULE; as `ip rule del` does), and `ip rule flush` where the image has ip
REMOVE_RULES = (
    """
import errno, shutil, socket, struct, subprocess
def delete(family, priority):
    body = struct.pack("=BBBBBBBBI", family, 0, 0, 0, 0, 0, 0, 0, 0) + struct.pack("=HHI", 8, 6, priority)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as s:
            s.settimeout(5)
            s.bind((0, 0))
            s.send(struct.pack("=IHHII", 16 + len(body), 33, 0x1 | 0x4, 1, 0) + body)
            reply = s.recv(65536)
    except OSError as exc:  # no netlink socket at all: refused too
        return exc.errno
    return -struct.unpack_from("=i", reply, 16)[0]
said = {{}}
for family, priorities in ((socket.AF_INET, range(400)), (socket.AF_INET6, range(400))):
    for priority in priorities:
        code = delete(family, priority)
        said[code] = said.get(code, 0) + 1
print("deleted", said.pop(0, 0), "refused", sorted(errno.errorcode.get(c, c) for c in said))
if shutil.which("ip"):
    print("ip", subprocess.run(["ip", "rule", "flush"], capture_output=True, text=True).returncode)
"""
    + CONNECT
)


@pytest.mark.as_user  # as a non-root user too: the sandbox's rules are then its user namespace's
def test_network_on_a_block_cannot_remove_the_rules(mode, make_hostile):
    server = TcpServer(host="0.0.0.0")
    address = _host_address()
    try:
        executor = _network_on(mode, make_hostile)
        removing = run_then_healthy(executor, "python", REMOVE_RULES.format(host=address, port=server.port))
        after = run_then_healthy(executor, "python", CONNECT.format(host=address, port=server.port))
    finally:
        server.close()
    assert "deleted 0 refused" in removing.output, removing.output
    assert "EPERM" in removing.output or "EACCES" in removing.output, removing.output
    assert "ip 0" not in removing.output, removing.output
    assert "CONNECTED" not in removing.output + after.output, removing.output + after.output
    assert "failed" in after.output, after.output
    assert server.accepted == []


def _slirp_children() -> set[int]:
    """slirp4netns processes whose parent is this one."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            comm = (entry / "comm").read_text().strip()
        except (OSError, IndexError):
            continue
        if comm == "slirp4netns" and int(fields[1]) == os.getpid():
            found.add(int(entry.name))
    return found


def test_network_on_leaves_no_process_behind(mode, tmp_path):
    not_for(mode, {"landlock", "remote", *DOCKER_MODES}, "no egress namespace of its own")
    REQUIRES[mode]()
    before = _slirp_children()
    executor = MODES[mode](Workspace(tmp_path / "own"), NETWORK_ON)
    with executor:
        assert executor.run(CodeBlock("python", "print(6*7)")).output == "42\n"
        started = _slirp_children() - before
        assert len(started) == 1, started  # one egress namespace for the executor
    assert not (started & _slirp_children())
    assert not any(Path(f"/proc/{pid}").exists() for pid in started)  # ended and reaped
