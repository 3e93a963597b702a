"""The Docker-hosted Jupyter server's entry with ``Limits(network=True)``:
the internet, not this machine. Runs INSIDE the container, standard library
only, Python 3.7 or later, as ``python3 -I -S -B gateway_entry.py CONFIG
COMMAND...`` (``_docker_guard.py`` makes it the container's entry point;
COMMAND is the image's own entry point and command: the Kernel Gateway).

The container starts as root with NET_ADMIN, SETUID, SETGID and SETPCAP
alone. Before the gateway (and so any kernel) runs, this program:

1. opens the server's way in (below) and installs the Docker backend's
   routing rules in the container's own network namespace (``egress.guard``,
   from the agent's folder, bound in read-only with ``_netlink.py``; CONFIG
   names both and the host's addresses): DNS to the container's
   nameservers on port 53; the host's addresses, loopback, link-local, the
   private ranges and IPv6 unreachable. That drops NET_ADMIN;
2. empties the bounding set (SETPCAP) and the ambient set;
3. becomes the server's user for good (``blockuser.become``: real,
   effective and saved uid and gid; the kernel clears the permitted and
   effective sets), empties the inheritable set, sets no_new_privs;
4. checks ``/proc/self/status``: every capability set empty, no_new_privs;
5. says GUARDED on its stdout, forks, and the child execs COMMAND.

The way in: the rules also make the host unreachable for the gateway's
answers (the host connects from the bridge's gateway, a host address). So
the host reaches the gateway through a relay, this program's parent half:
a listening socket on ``relay_port`` marked (SO_MARK, which takes
NET_ADMIN: set in step 1) so that one more rule lets the packets of its
connections, and those alone, leave by the main table; each connection is
copied to the gateway on the container's loopback. No kernel can mark a
socket, or reach this one: the relay is not dumpable (no ptrace, no
/proc/PID/fd for its uid's other processes) and the gateway's child is
started without it. The relay leaves with the gateway's status.

Where a step fails it says REFUSED and why, and waits to be killed rather
than exit (an auto-removed container would take its log with it): the host
then refuses the network on, never hands out the host's network.
"""

import errno
import json
import os
import selectors
import socket
import struct
import sys
import time

__all__ = ["GUARDED", "REFUSED", "Relay", "main"]

GUARDED = "execbox-gateway: guarded"
REFUSED = "execbox-gateway: refused: "
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 4, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAPABILITY_SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
STATUS_MAX = 64 * 1024
# the relay's mark, and the rule that lets its packets out (after DNS's, before the forbidden ones')
SO_MARK, MARK, MARK_PRIORITY = 36, 0x65786278, 150
FRA_FWMARK, FRA_FWMASK = 10, 16
MAX_PAIRS, CHUNK = 64, 1 << 16


def _say(text):
    os.write(1, (text + "\n").encode("utf-8", "replace"))


def _attr(kind, payload):
    return struct.pack("=HH", 4 + len(payload), kind) + payload  # 4-byte payloads: no padding


def open_way_in(netlink, port):
    """The relay's listening socket, marked, and the rule for its packets
    (root with NET_ADMIN)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, SO_MARK, MARK)
    listener.bind(("0.0.0.0", port))
    listener.listen(16)
    body = netlink.rule_message("0.0.0.0/0", MARK_PRIORITY, unreachable=False, protocol=socket.IPPROTO_TCP)
    body += _attr(FRA_FWMARK, struct.pack("=I", MARK)) + _attr(FRA_FWMASK, struct.pack("=I", 0xFFFFFFFF))
    netlink._talk(netlink.RTM_NEWRULE, netlink.NLM_F_ACK | netlink.NLM_F_CREATE | netlink.NLM_F_EXCL, body)
    return listener


def _empty_bounding_and_ambient(prctl, blockuser):
    blockuser.drop_bounding_set(prctl)
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # a kernel before 4.3: no ambient set at all
            raise


def _left():
    """What this process still holds that it must not: capability sets not
    empty, no_new_privs unset."""
    fd = os.open("/proc/self/status", os.O_RDONLY)
    try:
        text = os.read(fd, STATUS_MAX).decode("ascii", "replace")
    finally:
        os.close(fd)
    status = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    left = [f"{name} {status[name].strip()}" for name in CAPABILITY_SETS if int(status.get(name, "0"), 16)]
    if status.get("NoNewPrivs", "1").strip() != "1":
        left.append("no_new_privs unset")
    return left


def guard_and_drop(config):
    """Steps 1 to 4 (module docstring): the relay's listening socket, the
    number of rules, prctl."""
    sys.path.insert(0, config["agent"])
    import blockuser  # the agent's folder
    import egress

    prctl = blockuser.load_prctl()
    user = blockuser.BlockUser(config["user"])
    try:
        listener = open_way_in(egress.load_netlink(config["netlink"]), config["relay_port"])
    except OSError as exc:
        raise egress.Unguarded(f"the relay's marked socket or its rule failed ({exc})") from None
    rules = egress.guard(json.dumps(config)) + 1
    _empty_bounding_and_ambient(prctl, blockuser)
    blockuser.become(user, prctl)
    egress.drop_capabilities(range(64))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    left = _left()
    if left:
        raise OSError(errno.EPERM, f"still held after dropping them: {', '.join(left)}")
    return listener, rules, prctl


class Relay:
    """Copies each connection to ``listener`` to ``upstream`` and back, in
    one thread (no thread per connection: they count against the
    container's processes); at most MAX_PAIRS at once, CHUNK bytes waiting
    per direction."""

    def __init__(self, listener, upstream):
        self.listener, self.upstream = listener, upstream
        self.selector = selectors.DefaultSelector()
        listener.setblocking(False)
        self.selector.register(listener, selectors.EVENT_READ)
        self.peer, self.out, self.ended, self.masks = {}, {}, set(), {}

    def serve(self, child):
        """Until ``child`` (the gateway) ends; its exit code."""
        while True:
            pid, status = os.waitpid(child, os.WNOHANG)
            if pid:
                return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
            for key, mask in self.selector.select(0.5):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._step(key.fileobj, mask)

    def _accept(self):
        try:
            client, _ = self.listener.accept()
        except OSError:
            return
        if len(self.peer) >= 2 * MAX_PAIRS:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=2)
        except OSError:  # the gateway is not up yet: the host tries again
            client.close()
            return
        for one, other in ((client, upstream), (upstream, client)):
            one.setblocking(False)
            one.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no delayed-ACK stall per message
            self.peer[one], self.out[one] = other, b""
        self._update(client)
        self._update(upstream)

    def _step(self, sock, mask):
        peer = self.peer.get(sock)
        if peer is None:
            return
        try:
            if mask & selectors.EVENT_WRITE:
                self._flush(sock)
            if mask & selectors.EVENT_READ and sock not in self.ended and not self.out[peer]:
                data = sock.recv(CHUNK)
                if data:
                    self.out[peer] = data
                else:
                    self.ended.add(sock)
                self._flush(peer)
        except OSError:
            self._close(sock)
            return
        if {sock, peer} <= self.ended and not self.out[sock] and not self.out[peer]:
            self._close(sock)
            return
        self._update(sock)
        self._update(peer)

    def _flush(self, sock):
        """Send what waits for ``sock``; once all is sent and its peer has
        ended, end ``sock``'s writing side."""
        if self.out[sock]:
            try:
                sent = sock.send(self.out[sock])
            except (BlockingIOError, InterruptedError):
                sent = 0
            self.out[sock] = self.out[sock][sent:]
        if not self.out[sock] and self.peer[sock] in self.ended:
            sock.shutdown(socket.SHUT_WR)

    def _update(self, sock):
        mask = 0
        if sock not in self.ended and not self.out[self.peer[sock]]:
            mask |= selectors.EVENT_READ
        if self.out[sock]:
            mask |= selectors.EVENT_WRITE
        had = self.masks.get(sock, 0)
        if mask and had:
            self.selector.modify(sock, mask)
        elif mask:
            self.selector.register(sock, mask)
        elif had:
            self.selector.unregister(sock)
        self.masks[sock] = mask

    def _close(self, sock):
        for one in (sock, self.peer[sock]):
            if self.masks.pop(one, 0):
                self.selector.unregister(one)
            self.peer.pop(one, None)
            self.out.pop(one, None)
            self.ended.discard(one)
            one.close()


def main():
    try:
        config, command = json.loads(sys.argv[1]), sys.argv[2:]
        if not command:
            raise ValueError("no command to run after the rules")
        listener, rules, prctl = guard_and_drop(config)
    except Exception as exc:  # noqa: BLE001 - any failure refuses the network on, saying why
        _say(f"{REFUSED}{exc}")
        while True:  # killed by the host, which read the line above
            time.sleep(3600)
    _say(f"{GUARDED} ({rules} rules; uid {os.getuid()}, no capability)")
    prctl(PR_SET_DUMPABLE, 0)  # the kernels, of the same uid, cannot reach the marked socket (the gateway's
    child = os.fork()  # exec makes it dumpable again)
    if child == 0:  # the gateway: without the marked socket
        listener.close()
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            _say(f"execbox-gateway: {command[0]}: {exc}")
        os._exit(127)
    os._exit(Relay(listener, ("127.0.0.1", int(config["gateway_port"]))).serve(child))


if __name__ == "__main__":
    main()
