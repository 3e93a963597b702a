"""A block's network when ``Limits(network=True)``: the internet, not this
machine.

One network namespace per executor (never shared between executors), which
its jails join: the pool's zygote (and so every unit and the stateful
session), each one-shot jail, the jailed Jupyter kernel. Its only way out is
slirp4netns, user-mode networking: the block's packets reach a process on
the host that opens ordinary sockets for them. So the block reaches what a
process of the jail's id reaches, minus what the namespace's routing rules
refuse, installed before any block runs (a block holds no capability over
the namespace, whose user namespace is not an ancestor of its own):

- packets to the host's loopback never leave the namespace (127/8 is the
  namespace's own), and slirp4netns runs with ``--disable-host-loopback``
  (its gateway, 10.0.2.2, would be the host's 127.0.0.1);
- unreachable: the host's own addresses (read at start: one added later is
  not covered), link-local 169.254/16 (the cloud metadata endpoint), the
  private and shared ranges (10/8, 172.16/12, 192.168/16, 100.64/10),
  0/8, 192.0.0/24, 198.18/15 and multicast and above (224/3); IPv6 is not
  offered at all (fc00::/7, fe80::/10 and ::1 of the host included);
- DNS goes through slirp4netns's forwarder, 10.0.2.3 (the jail's
  /etc/resolv.conf names it): UDP and TCP port 53 only, the resolver the
  host's /etc/resolv.conf names answering from the host's side; every other
  port of 10.0.2.3 is refused (slirp4netns would forward it to that
  resolver's address).

The namespaces are made by a holder process that becomes the jail id (as
root, ``become``) and makes a user namespace and the network namespace in
it, mapping itself to root there, then leaves (the descriptors keep them);
slirp4netns (root of that user namespace, the jail id on the host,
``--enable-sandbox --enable-seccomp``: it drops every capability) makes
its interface in the network namespace and its sockets in the host's;
then a short Python process of this process's user joins the network
namespace (a host user who is not root: the user namespace first, where
it is root) and installs the rules
(``_netlink.hold``). slirp4netns ends when its exit pipe
closes: ``Egress.close``, or the executor's process ending.

What it costs: a slirp4netns process per executor with the network on, and
its start (``open_egress``); blocks pay nothing per run.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from .._errors import BackendUnavailableError
from .._netlink import FORBIDDEN, host_addresses
from .._netlink import __file__ as NETLINK_SOURCE
from .._netlink import forbidden_rules as netlink_rules
from ._jail import CLONE_NEWNET, CLONE_NEWUSER
from ._jail import setns_net as setns

__all__ = [
    "DNS_FORWARDER",
    "FORBIDDEN",
    "GATEWAY",
    "INSTALL_SLIRP",
    "Egress",
    "forbidden_rules",
    "open_egress",
]

INSTALL_SLIRP = (
    "Limits(network=True) needs slirp4netns, which gives the block a network namespace of its own "
    "with a way to the internet and none to this machine (the host's network is never shared): "
    "apt-get install slirp4netns (./dev.sh does), or set Limits(network=False)"
)
GATEWAY, DNS_FORWARDER = "10.0.2.2", "10.0.2.3"  # slirp4netns's defaults (--cidr 10.0.2.0/24)
START_TIMEOUT_S = 20.0
SLIRP_LOG_BYTES = 1 << 20
_libc = ctypes.CDLL(None, use_errno=True)
_unshare, _prctl = _libc.unshare, _libc.prctl  # called between fork and exec: made here, not there
PR_SET_DUMPABLE = 4


def forbidden_rules(host_addresses: list[str]) -> list[list[object]]:
    """The namespace's rules (``_netlink.forbidden_rules``): DNS to the
    forwarder first, then every forbidden range and host address
    unreachable."""
    return netlink_rules([DNS_FORWARDER], host_addresses)


class Egress:
    """An executor's egress namespace (the module docstring). ``netns``
    and ``userns``: descriptors a jail joins (the user namespace first,
    for a host user who is not root: ``join``); ``resolv_conf``: the
    host file the jail sees as /etc/resolv.conf."""

    def __init__(
        self, netns: int, userns: int, slirp: subprocess.Popen[bytes], exit_fd: int, folder: str
    ) -> None:
        self.netns = netns
        self.userns = userns
        self.slirp = slirp
        self.folder = folder
        self.resolv_conf = os.path.join(folder, "resolv.conf")
        self._exit_fd = exit_fd

    @property
    def pid(self) -> int:
        """slirp4netns's process id."""
        return self.slirp.pid

    def join(self) -> tuple[int, int | None]:
        """(network namespace, user namespace to join first or None): root
        joins the network namespace alone; another user must be in its user
        namespace to be allowed to."""
        return self.netns, (self.userns if os.geteuid() != 0 else None)

    def close(self) -> None:
        """End slirp4netns (its exit pipe closes) and let the namespace go."""
        if self._exit_fd >= 0:
            os.close(self._exit_fd)
            self._exit_fd = -1
        try:
            self.slirp.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.slirp.kill()
            self.slirp.wait()
        for fd in (self.netns, self.userns):
            if fd >= 0:
                os.close(fd)
        self.netns = self.userns = -1
        shutil.rmtree(self.folder, ignore_errors=True)


def _own_namespaces(become: Callable[[], None]) -> Callable[[], None]:
    def make() -> None:  # in the holder, before it execs cat: system calls only
        become()
        # a changed id leaves the process undumpable, its /proc/self files root's: its maps unwritable
        if _prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "execbox: make the namespace's holder dumpable")
        uid, gid = os.geteuid(), os.getegid()
        if _unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "execbox: unshare a user and a network namespace")
        for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
            fd = os.open(f"/proc/self/{name}", os.O_WRONLY)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)

    return make


def _join(
    become: Callable[[], None], userns: int | None, netns: int | None, log_bytes: int = 0
) -> Callable[[], None]:
    def join() -> None:  # in a child, before it execs: system calls only
        if log_bytes:  # what a block's traffic makes it log: its log file, bounded (past it, it ends)
            resource.setrlimit(resource.RLIMIT_FSIZE, (log_bytes, log_bytes))
        become()
        if userns is not None and setns(userns, CLONE_NEWUSER) != 0:
            raise OSError(ctypes.get_errno(), "execbox: join the egress user namespace")
        if netns is not None and setns(netns, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "execbox: join the egress network namespace")

    return join


def _namespaces(become: Callable[[], None]) -> tuple[int, int]:
    """(network, user) namespace descriptors, made by a child that becomes
    the jail id first and leaves at once (the descriptors keep them)."""
    holder = subprocess.Popen(
        ["/bin/cat"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=_own_namespaces(become),
        close_fds=True,
    )
    try:
        netns = os.open(f"/proc/{holder.pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC)
        try:
            return netns, os.open(f"/proc/{holder.pid}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
        except BaseException:
            os.close(netns)
            raise
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait()


def open_egress(become: Callable[[], None], *, backend: str, reachable_dir: Callable[[str], bool]) -> Egress:
    """An egress namespace for one executor (the module docstring);
    ``become``: what makes a child the jail id (``Jailer.become``);
    ``reachable_dir``: whether the jail id reaches a folder (where the
    resolver file lies). BackendUnavailableError when it cannot be made."""
    slirp = shutil.which("slirp4netns")
    if slirp is None:
        raise BackendUnavailableError(backend, INSTALL_SLIRP)
    config = {"rules": forbidden_rules(host_addresses())}
    base = tempfile.gettempdir() if reachable_dir(tempfile.gettempdir()) else "/tmp"
    folder = tempfile.mkdtemp(prefix="execbox-egress-", dir=base)
    os.chmod(folder, 0o755)
    Path(folder, "resolv.conf").write_text(f"nameserver {DNS_FORWARDER}\n")
    os.chmod(os.path.join(folder, "resolv.conf"), 0o644)
    deadline = time.monotonic() + START_TIMEOUT_S
    fds: list[int] = []
    slirp_proc = None
    try:
        try:
            netns, userns = _namespaces(become)
        except (OSError, subprocess.SubprocessError) as exc:
            raise _failed(backend, f"no user and network namespace ({exc})", folder, "") from None
        fds += [netns, userns]
        ready_r, ready_w = os.pipe()
        exit_r, exit_w = os.pipe()
        fds += [ready_r, ready_w, exit_r, exit_w]
        with open(os.path.join(folder, "slirp4netns.log"), "wb") as log:
            slirp_proc = subprocess.Popen(
                [
                    slirp,
                    "--configure",
                    "--mtu=65520",
                    "--disable-host-loopback",
                    "--enable-sandbox",
                    "--enable-seccomp",
                    f"--ready-fd={ready_w}",
                    f"--exit-fd={exit_r}",
                    "--netns-type=path",
                    f"/proc/self/fd/{netns}",
                    "tap0",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                pass_fds=(ready_w, exit_r, netns),
                # root of the namespace's user namespace (the jail id on the host): --enable-sandbox makes
                # a mount namespace and drops every capability there, which a plain user may not
                preexec_fn=_join(become, userns, None, log_bytes=SLIRP_LOG_BYTES),
                close_fds=True,
            )
        for fd in (ready_w, exit_r):
            os.close(fd)
            fds.remove(fd)
        left = deadline - time.monotonic()
        ready = select.select([ready_r], [], [], max(left, 0))[0] and os.read(ready_r, 1) == b"1"
        os.close(ready_r)
        fds.remove(ready_r)
        if not ready:
            raise _failed(backend, "slirp4netns did not start", folder, "slirp4netns.log")
        _install_rules(config, netns, None if os.geteuid() == 0 else userns, deadline, backend, folder)
        egress = Egress(netns, userns, slirp_proc, exit_w, folder)
        fds.clear()  # the egress's now
        return egress
    except BaseException:
        if slirp_proc is not None and slirp_proc.poll() is None:
            slirp_proc.kill()
            slirp_proc.wait()
        for fd in fds:
            os.close(fd)
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _install_rules(
    config: dict[str, list[list[object]]],
    netns: int,
    userns: int | None,
    deadline: float,
    backend: str,
    folder: str,
) -> None:
    """Run ``_netlink.hold`` in the namespace, as this process's user: the
    host's root, or the root of the namespace's user namespace."""
    source = Path(NETLINK_SOURCE).read_text()
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", source, json.dumps(config)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            preexec_fn=_join(lambda: None, userns, netns),
            pass_fds=[fd for fd in (netns, userns) if fd is not None],
            timeout=max(deadline - time.monotonic(), 1),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise _failed(backend, f"its routing rules could not be installed ({exc})", folder, "") from None
    if done.returncode != 0 or done.stdout != b"ok\n":
        said = done.stderr[-2000:].decode("utf-8", "replace").strip()
        raise _failed(backend, f"its routing rules could not be installed ({said})", folder, "")


def _failed(backend: str, what: str, folder: str, log: str) -> BackendUnavailableError:
    said = ""
    if log:
        try:
            with open(os.path.join(folder, log), "rb") as handle:
                said = handle.read(2000).decode("utf-8", "replace").strip()
        except OSError:
            pass
    return BackendUnavailableError(
        backend,
        f"Limits(network=True): the block's network namespace could not be made: {what}"
        f"{f' ({said})' if said else ''}; `execbox doctor` checks this host, or set Limits(network=False)",
    )
