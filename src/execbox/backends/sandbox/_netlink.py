"""Route netlink, the few messages execbox sends: the host's own addresses
(``host_addresses``), and the routing rules of an egress namespace
(``_egress``), which this file installs when run as a script in that
namespace (``hold``), with its capabilities.

Plain ``socket.AF_NETLINK``, no ``ip`` program: iproute2 is not in every
image (Debian's slim ones lack it). This file imports nothing of execbox:
it runs as ``python -I -S -c SOURCE CONFIG``.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys

__all__ = ["hold", "host_addresses", "rule_message"]

RTM_GETADDR, RTM_NEWRULE = 22, 32
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE, NLM_F_DUMP = 0x1, 0x4, 0x200, 0x400, 0x300
NLMSG_ERROR, NLMSG_DONE = 2, 3
IFA_ADDRESS, IFA_LOCAL = 1, 2
FRA_DST, FRA_PRIORITY, FRA_TABLE, FRA_IP_PROTO, FRA_DPORT_RANGE = 1, 6, 15, 22, 24
FR_ACT_TO_TBL, FR_ACT_UNREACHABLE = 1, 7
RT_TABLE_MAIN = 254
SIOCSIFFLAGS, IFF_UP_RUNNING_LOOPBACK = 0x8914, 0x1 | 0x8 | 0x40
MAX_REPLY = 1 << 16


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


def hold(config: dict[str, list[list[object]]]) -> None:
    """In an egress namespace, with its capabilities (its user namespace's
    root, or the host's): bring loopback up, install the rules of
    ``config``, say ``ok``."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH22x", b"lo", IFF_UP_RUNNING_LOOPBACK))
    for network, priority, unreachable, protocol, port in config["rules"]:
        body = rule_message(
            str(network),
            int(str(priority)),
            unreachable=bool(unreachable),
            protocol=None if protocol is None else int(str(protocol)),
            port=None if port is None else int(str(port)),
        )
        _talk(RTM_NEWRULE, NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL, body)
    print("ok", flush=True)


if __name__ == "__main__":
    hold(json.loads(sys.argv[1]))
