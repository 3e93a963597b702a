"""The container's network with ``Limits(network=True)``: the internet, not
this machine. Runs INSIDE the container, standard library only (``agent.py``,
beside this file, imports it).

Docker's bridge reaches the host: its gateway is the host, and the host
routes the rest (its other addresses, its private networks, the cloud
metadata endpoint). So before any block runs, while it is still root with
CAP_NET_ADMIN, the agent installs routing rules in the container's own
network namespace (``guard``): DNS to the nameservers the container's
/etc/resolv.conf names (UDP and TCP port 53) looked up in the main table
first; then unreachable: the host's loopback and private, shared,
link-local and multicast ranges, the host's own addresses (read by the
host, given in the agent's command) and all of IPv6. The local table (the
container's own loopback and address) is looked up before them all. The
rules and their encoding are the sandbox's (``execbox/_netlink.py``,
bound in read-only; the host names its path in the config).

Then CAP_NET_ADMIN leaves the agent's permitted set (``drop_capability``);
``blockuser.enter`` empties the bounding set right after, and a block
holds no capability at all (``blockuser.become``): no block can remove the
rules. Where they cannot be installed (gVisor's netstack has no routing
rules; a container without CAP_NET_ADMIN), ``guard`` raises ``Unguarded``
and the agent leaves without serving: the host refuses the network on,
never hands out the host's network.
"""

import ctypes
import importlib.util
import ipaddress
import json
import os

__all__ = [
    "CAP_NET_ADMIN",
    "Unguarded",
    "drop_capabilities",
    "drop_capability",
    "guard",
    "guard_or_leave",
    "load_netlink",
    "nameservers",
]

CAP_NET_ADMIN = 12
RESOLV_CONF = "/etc/resolv.conf"
RESOLV_MAX = 64 * 1024
_CAP_VERSION_3 = 0x20080522


class Unguarded(Exception):
    """The container's routing rules could not be installed."""


def nameservers(path=RESOLV_CONF):
    """The IPv4 nameservers ``path`` names, in order (read: its first RESOLV_MAX bytes)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return []
    try:
        text = os.read(fd, RESOLV_MAX).decode("utf-8", "replace")
    finally:
        os.close(fd)
    found = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == "nameserver":
            try:
                address = ipaddress.ip_address(words[1])
            except ValueError:
                continue
            if address.version == 4 and str(address) not in found:
                found.append(str(address))
    return found


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_capability(cap):
    """Take ``cap`` out of this process's effective, permitted and
    inheritable sets (OSError where the kernel refuses)."""
    drop_capabilities([cap])


def drop_capabilities(caps):
    """Take each of ``caps`` out of this process's effective, permitted and
    inheritable sets (OSError where the kernel refuses); ``range(64)``
    empties them (the Docker-hosted Jupyter server's entry, jupyter/_gateway_entry.py)."""
    libc = ctypes.CDLL(None, use_errno=True)
    header, data = _Header(_CAP_VERSION_3, 0), (_Data * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capget: {os.strerror(code)}")
    for cap in caps:
        word, bit = divmod(cap, 32)
        for field in ("effective", "permitted", "inheritable"):
            setattr(data[word], field, getattr(data[word], field) & ~(1 << bit))
    if libc.capset(ctypes.byref(header), data) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"capset: {os.strerror(code)}")


def load_netlink(path):
    """The rules' module (``execbox/_netlink.py``, bound in read-only at ``path``)."""
    spec = importlib.util.spec_from_file_location("execbox_netlink", path)
    if spec is None or spec.loader is None:
        raise Unguarded(f"no rules' module at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def guard(config_text):
    """Install the rules (module docstring) as the config (JSON: the rules'
    module ``netlink``, the host's ``host_addresses``) says, then drop
    CAP_NET_ADMIN; the number of rules. Unguarded when they cannot be."""
    try:
        config = json.loads(config_text)
        netlink = load_netlink(config["netlink"])
        rules = netlink.forbidden_rules(nameservers(), [str(a) for a in config["host_addresses"]])
    except (ValueError, KeyError, TypeError, OSError, SyntaxError, ImportError) as exc:
        raise Unguarded(f"the container's routing rules could not be made ({exc!r})") from None
    try:
        netlink.install(rules)
    except OSError as exc:
        raise Unguarded(
            f"the container's routing rules could not be installed ({exc}): they need a kernel with "
            "FIB rules (runc; gVisor's netstack has none) and CAP_NET_ADMIN for the agent at its start"
        ) from None
    try:
        drop_capability(CAP_NET_ADMIN)
    except (OSError, AttributeError) as exc:
        raise Unguarded(f"the agent could not drop CAP_NET_ADMIN ({exc})") from None
    return len(rules)


def guard_or_leave(config_text):
    """``guard``, or the agent leaves (SystemExit) saying why: the host then
    refuses the network on, never hands out the host's network."""
    try:
        return guard(config_text)
    except Unguarded as exc:
        raise SystemExit(f"execbox-agent: Limits(network=True): {exc}") from None
