"""Route netlink, the few messages execbox sends to keep a block with the
network on off this machine: the host's own addresses (``host_addresses``)
and the routing rules that make them, the host's loopback, link-local and
the private ranges unreachable (``forbidden_rules``, ``install``). Two
users, one rule: the sandbox's egress namespace (``jail._egress`` runs
this file as a script in it: ``hold``, with its capabilities) and the
Docker backend's container (its agent loads this file, bound in read-only,
and installs the rules before any block runs: ``docker/_agent/egress.py``).

Plain ``socket.AF_NETLINK``, no ``ip`` program: iproute2 is not in every
image (Debian's slim ones lack it). This file imports nothing of execbox
and runs on Python 3.7 or later: it runs as ``python -I -S -c SOURCE
CONFIG``, and in a container's own Python.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys

__all__ = [
    "FORBIDDEN",
    "MAX_NAMESERVERS",
    "forbidden_rules",
    "hold",
    "host_addresses",
    "install",
    "rule_message",
]

RTM_GETADDR, RTM_NEWRULE = 22, 32
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE, NLM_F_DUMP = 0x1, 0x4, 0x200, 0x400, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFA_ADDRESS, IFA_LOCAL = 1, 2
FRA_DST, FRA_PRIORITY, FRA_TABLE, FRA_IP_PROTO, FRA_DPORT_RANGE = 1, 6, 15, 22, 24
FR_ACT_TO_TBL, FR_ACT_UNREACHABLE = 1, 7
RT_TABLE_MAIN = 254
SIOCSIFFLAGS, IFF_UP_RUNNING_LOOPBACK = 0x8914, 0x1 | 0x8 | 0x40
MAX_REPLY = 1 << 16
# What a block with the network on never reaches (the host's own addresses are added to it)
FORBIDDEN = (
    "0.0.0.0/8",
    "10.0.0.0/8",  # slirp4netns's own network among them: its gateway is the host's loopback
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",  # link-local: the cloud metadata endpoint, which hands out credentials
    "172.16.0.0/12",  # Docker's bridges among them: their gateway is the host
    "192.0.0.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/3",
    "::/0",  # no IPv6 way out is offered: the host's ::1, fc00::/7 and fe80::/10 among them
)
MAX_NAMESERVERS = 8  # DNS rules take priorities 100 to 115; the forbidden ones start at 200


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * (-length % 4)


def _attrs(data: bytes) -> dict[int, bytes]:
    found: dict[int, bytes] = {}
    while len(data) >= 4:
        length, kind = struct.unpack_from("=HH", data)
        if length < 4:
            break
        found.setdefault(kind & 0x3FFF, data[4:length])
        data = data[(length + 3) & ~3 :]
    return found


def _talk(message_type: int, flags: int, body: bytes) -> list[tuple[int, bytes]]:
    """Send one request in this process's network namespace; its replies
    (type, payload) until the dump's end or the acknowledgement. OSError
    with the kernel's errno for a refused request."""
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as sock:
        sock.settimeout(10)
        sock.bind((0, 0))
        sock.send(struct.pack("=IHHII", 16 + len(body), message_type, NLM_F_REQUEST | flags, 1, 0) + body)
        replies: list[tuple[int, bytes]] = []
        while True:
            data = sock.recv(MAX_REPLY)
            while len(data) >= 16:
                length, kind = struct.unpack_from("=IH", data)
                if length < 16:
                    raise OSError("a netlink reply shorter than its header")
                payload = data[16:length]
                if kind == NLMSG_DONE:
                    return replies
                if kind == NLMSG_ERROR:
                    (error,) = struct.unpack_from("=i", payload)
                    if error:
                        raise OSError(-error, f"netlink: {os.strerror(-error)}")
                    return replies
                replies.append((kind, payload))
                data = data[(length + 3) & ~3 :]


def host_addresses() -> list[str]:
    """Every address of this network namespace's interfaces (IPv4 and
    IPv6), as text."""
    found: list[str] = []
    for _, payload in _talk(RTM_GETADDR, NLM_F_DUMP, struct.pack("=BBBBI", socket.AF_UNSPEC, 0, 0, 0, 0)):
        family = payload[0]
        attributes = _attrs(payload[8:])
        raw = attributes.get(IFA_LOCAL, attributes.get(IFA_ADDRESS))
        if raw is not None and family in (socket.AF_INET, socket.AF_INET6):
            text = socket.inet_ntop(family, raw)
            if text not in found:
                found.append(text)
    return found


def rule_message(
    network: str, priority: int, *, unreachable: bool, protocol: int | None = None, port: int | None = None
) -> bytes:
    """An RTM_NEWRULE body: packets to ``network`` (CIDR text) are
    unreachable, or looked up in the main table (``protocol`` and ``port``:
    only those)."""
    net = ipaddress.ip_network(network)
    family = socket.AF_INET if net.version == 4 else socket.AF_INET6
    action = FR_ACT_UNREACHABLE if unreachable else FR_ACT_TO_TBL
    table = 0 if unreachable else RT_TABLE_MAIN
    body = struct.pack("=BBBBBBBBI", family, net.prefixlen, 0, 0, table, 0, 0, action, 0)
    if net.prefixlen:
        body += _attr(FRA_DST, net.network_address.packed)
    body += _attr(FRA_PRIORITY, struct.pack("=I", priority))
    if not unreachable:
        body += _attr(FRA_TABLE, struct.pack("=I", RT_TABLE_MAIN))
    if protocol is not None:
        body += _attr(FRA_IP_PROTO, struct.pack("=B", protocol))
    if port is not None:
        body += _attr(FRA_DPORT_RANGE, struct.pack("=HH", port, port))
    return body


def forbidden_rules(nameservers: list[str], host_addresses: list[str]) -> list[list[object]]:
    """The rules, (network, priority, unreachable, protocol, port) each:
    DNS (UDP and TCP port 53) to each of ``nameservers`` (IPv4; the first
    MAX_NAMESERVERS) looked up in the main table first, then every forbidden
    range and host address unreachable. The local table (the namespace's
    own loopback and addresses) is looked up before all of them."""
    rules: list[list[object]] = []
    servers = [s for s in dict.fromkeys(nameservers) if ipaddress.ip_address(s).version == 4]
    for n, server in enumerate(servers[:MAX_NAMESERVERS]):
        rules += [[f"{server}/32", 100 + 2 * n, False, 17, 53], [f"{server}/32", 101 + 2 * n, False, 6, 53]]
    ranges = [*FORBIDDEN, *(a + ("/32" if ":" not in a else "/128") for a in host_addresses)]
    rules += [[net, 200 + n, True, None, None] for n, net in enumerate(dict.fromkeys(ranges))]
    return rules


def install(rules: list[list[object]]) -> None:
    """Add ``rules`` (``forbidden_rules``) to this process's network
    namespace; OSError with the kernel's errno for one refused (EPERM:
    no CAP_NET_ADMIN; EOPNOTSUPP: a network stack without routing rules,
    gVisor's). An IPv6 rule where the kernel has no IPv6 at all
    (EAFNOSUPPORT) is left out: there is no IPv6 to forbid."""
    for network, priority, unreachable, protocol, port in rules:
        body = rule_message(
            str(network),
            int(str(priority)),
            unreachable=bool(unreachable),
            protocol=None if protocol is None else int(str(protocol)),
            port=None if port is None else int(str(port)),
        )
        try:
            _talk(RTM_NEWRULE, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body)
        except OSError as exc:
            if not (exc.errno == errno.EAFNOSUPPORT and ":" in str(network)):
                raise


def hold(config: dict[str, list[list[object]]]) -> None:
    """In an egress namespace, with its capabilities (its user namespace's
    root, or the host's): bring loopback up, install the rules of
    ``config``, say ``ok``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP_RUNNING_LOOPBACK))
    install(config["rules"])
    print("ok", flush=True)


if __name__ == "__main__":
    hold(json.loads(sys.argv[1]))
