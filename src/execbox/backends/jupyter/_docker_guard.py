"""The Docker-hosted Jupyter server's network on: the internet, not this
machine, as the Docker backend's (``docker/_agent/egress.py``).

Docker's default bridge reaches the host (its gateway is the host, which
routes the rest: its other addresses, its private networks, the cloud
metadata endpoint). So with ``Limits(network=True)`` the container starts
as root with NET_ADMIN, SETUID, SETGID and SETPCAP alone, and its entry
point is a small program (``_gateway_entry.py``, bound in read-only with
the agent's folder and ``_netlink.py``) that installs the Docker backend's
routing rules in the container's own network namespace, becomes the
server's user with no capability left (every set empty, the bounding set
too, no_new_privs), and execs the image's own command: the Kernel Gateway.
The host waits for its word (``await_guard``) before it waits for the
gateway; where the rules cannot be installed (gVisor's netstack has no
routing rules; an image without python3) the server does not start
(``network_refused``), never on the bridge as it is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._errors import BackendUnavailableError
from ..._netlink import host_addresses
from ..docker import container_kit

__all__ = [
    "ENTRY_CAPABILITIES",
    "RELAY_PORT",
    "await_guard",
    "guarded",
    "network_refused",
    "this_hosts_addresses",
]

ENTRY_SOURCE = Path(__file__).with_name("_gateway_entry.py")
ENTRY_MOUNT = "/opt/execbox/gateway_entry.py"
# what the entry needs: the rules (NET_ADMIN), the bounding set (SETPCAP), the server's user (SETUID, SETGID)
ENTRY_CAPABILITIES = ["SETUID", "SETGID", "SETPCAP", container_kit.EGRESS_CAPABILITY]
# the entry's words (_gateway_entry.py's GUARDED and REFUSED; that file is not imported here)
GUARDED, REFUSED = "execbox-gateway: guarded", "execbox-gateway: refused: "
# the container's entry point; the config of its rules ($1), then the image's command
ENTRY_POINT = [
    "/bin/sh",
    "-c",
    "command -v python3 >/dev/null 2>&1 || "
    f'{{ echo "{REFUSED}the image has no python3 on its PATH"; '
    "command -v sleep >/dev/null 2>&1 && exec sleep infinity; exec /bin/sleep infinity; }; "
    f'exec python3 -I -S -B {ENTRY_MOUNT} "$@"',
    "execbox-gateway",
]
# where the entry's relay listens (published instead of the gateway's port: _gateway_entry.py says why)
RELAY_PORT = 18888
GUARD_TIMEOUT_S = 30.0
LOG_LINES = 200
WHY_MAX = 2000


def this_hosts_addresses(runtime: str | None) -> list[str]:
    """This host's own addresses, made unreachable (read at each start)."""
    try:
        return host_addresses()
    except OSError as exc:
        raise network_refused(f"this host's own addresses could not be read ({exc})", runtime) from None


def guarded(
    settings: dict[str, Any],
    image_config: Mapping[str, Any],
    *,
    user: str,
    addresses: Sequence[str],
    gateway_port: int,
) -> dict[str, Any]:
    """``settings`` (``confined``'s) for the entry: root with
    ENTRY_CAPABILITIES, the entry point above, the image's own entry point
    and command run after it as ``user``, RELAY_PORT copied to
    ``gateway_port`` on the container's loopback."""
    command = [*(image_config.get("Entrypoint") or []), *(image_config.get("Cmd") or [])]
    if not command:
        raise network_refused("the image has no command (CMD) to run after them", settings.get("runtime"))
    config = {
        "netlink": container_kit.NETLINK_MOUNT,
        "host_addresses": list(addresses),
        "agent": container_kit.AGENT_MOUNT,
        "user": user,
        "relay_port": RELAY_PORT,
        "gateway_port": gateway_port,
    }
    return {
        **settings,
        "user": "0:0",
        "cap_add": list(ENTRY_CAPABILITIES),
        "entrypoint": list(ENTRY_POINT),
        "command": [json.dumps(config), *command],
        "ports": {f"{RELAY_PORT}/tcp": ("127.0.0.1", None)},  # on this host's loopback only
        "volumes": {
            str(container_kit.AGENT_SOURCE): {"bind": container_kit.AGENT_MOUNT, "mode": "ro"},
            str(container_kit.NETLINK_SOURCE): {"bind": container_kit.NETLINK_MOUNT, "mode": "ro"},
            str(ENTRY_SOURCE): {"bind": ENTRY_MOUNT, "mode": "ro"},
        },
    }


def await_guard(container: Any, runtime: str | None, timeout_s: float = GUARD_TIMEOUT_S) -> str:
    """The entry's GUARDED line, once it said it; ``network_refused`` when
    it said REFUSED, the container ended first, or ``timeout_s`` passed."""
    end = time.monotonic() + timeout_s
    while True:
        try:
            container.reload()
            status = container.status
            text = container.logs(tail=LOG_LINES).decode("utf-8", "replace")
        except Exception:  # noqa: BLE001 - removed once it exited (auto_remove)
            status, text = "gone", ""
        for line in text.splitlines():
            if line.startswith(GUARDED):
                return line
            if line.startswith(REFUSED):
                raise network_refused(line[len(REFUSED) :][:WHY_MAX], runtime)
        if status not in ("created", "running"):
            raise network_refused(
                f"the container ended first ({status}; its log: {text[-WHY_MAX:]!r})", runtime
            )
        if time.monotonic() > end:
            raise network_refused(f"no word from its entry in {timeout_s:.0f} s", runtime)
        time.sleep(0.02)


def network_refused(why: str, runtime: str | None) -> BackendUnavailableError:
    """Why the network on cannot be had: never Docker's bridge as it is."""
    change = (
        "gVisor's network stack has no routing rules: use runtime runc (the default)"
        if runtime == "runsc"
        else "Use an image with python3 3.7 or later on its PATH and a command (CMD)"
    )
    return BackendUnavailableError(
        "docker",
        "DockerJupyterServer with Limits(network=True) needs routing rules in its container, which keep "
        f"kernels off this machine, installed before the Kernel Gateway starts; they could not be ({why}). "
        f"{change}, or set Limits(network=False)",
    )
