"""The container an executor runs its blocks in: hardened settings mapped
from ``Limits``, the user's overrides merged with a warning, and the
clean-up of containers whose owner process has died.

No I/O in ``container_settings``; the rest talks to the engine.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import threading
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._errors import ConfigurationError
from ..._models import Limits
from ..._workspace import INTERNAL_DIR
from .. import _ownership

__all__ = [
    "AGENT_CAPABILITIES",
    "AGENT_COMMAND",
    "AGENT_USER",
    "EGRESS_CAPABILITY",
    "KEEPALIVE",
    "WORKDIR",
    "WRITABLE_INTERNAL",
    "confined",
    "container_settings",
    "container_user",
    "gpu_requests",
    "hand_over",
    "merge_overrides",
    "normalize_volumes",
    "owner_label",
    "reap_orphans",
    "track",
]

WORKDIR = "/workspace"
KEEPALIVE = ["sleep", "infinity"]
# The agent's folder and the sandbox's (run_file.py), bound in read-only.
AGENT_SOURCE = Path(__file__).with_name("_agent")
RUN_FILE_SOURCE = Path(__file__).parent.parent / "sandbox" / "_zygote"
AGENT_MOUNT, RUN_FILE_MOUNT = "/opt/execbox/agent", "/opt/execbox/run_file"
# The routing rules of the network on (the sandbox's too), bound in read-only for the agent (_agent/egress.py)
NETLINK_SOURCE = Path(__file__).parents[2] / "_netlink.py"
NETLINK_MOUNT = "/opt/execbox/netlink.py"
# The container's command, with who blocks run as after it ($1) and, with
# the network on, the config of its routing rules ($2): the agent when the
# image has python3; else a word to the host (after its hello, a line) and
# the keep-alive, for exec (in a new container: this one is root's).
AGENT_COMMAND = [
    "/bin/sh",
    "-c",
    "command -v python3 >/dev/null 2>&1 && "
    f'exec python3 -u {AGENT_MOUNT}/agent.py {RUN_FILE_MOUNT} "$1" "$2"; '
    "read -r _; echo execbox-no-agent; exec sleep infinity </dev/null >/dev/null 2>&1",
    "execbox-agent",
]
# Who an agent's container runs as, and all it may do: the agent keeps root
# as its real uid and runs blocks as the block user (_agent/blockuser.py),
# so that no block owns the container's stdio, the host's channel
AGENT_USER = "0:0"
AGENT_CAPABILITIES = ["SETUID", "SETGID", "SETPCAP"]
# and, with the network on, to install the routing rules at its start (then dropped: _agent/egress.py)
EGRESS_CAPABILITY = "NET_ADMIN"
NOBODY = "65534:65534"
LABEL_OWNER = "org.execbox.owner"
LABEL_KEEP = "org.execbox.keep"
# processes of ours in the container besides the block: init, keep-alive, wrapper
OVERHEAD_PROCESSES = 3
# with the agent: init and the agent
AGENT_OVERHEAD_PROCESSES = 2
# .execbox/ is read-only for blocks (no block can leave a set-ID program among
# their code files, so runs need not walk them: one more a block), but for
# these folders in it (matplotlib's cache, MPLCONFIGDIR; the builds of compiled
# languages, _build: written by their compiler, in the container)
WRITABLE_INTERNAL = ("matplotlib", "build")


def container_user() -> str:
    """Who blocks run as: the host user when it is not root (so files in the
    workspace stay theirs), else nobody."""
    uid = os.getuid()
    return f"{uid}:{os.getgid()}" if uid != 0 else NOBODY


def container_settings(
    *,
    image: str,
    workspace: str,
    limits: Limits,
    memory_mb: int,
    max_processes: int,
    user: str,
    env: Mapping[str, str],
    volumes: Mapping[str, dict[str, str]],
    tmp_size_mb: int,
    open_files: int,
    file_size_mb: int,
    runtime: str | None,
    device_requests: list[Any] | None,
    auto_remove: bool,
    name: str | None,
    keep: bool,
    agent: bool,
    host_addresses: Sequence[str] = (),
) -> dict[str, Any]:
    """Keyword arguments for ``containers.create``: hardened by default.
    ``agent``: the container's command is execbox's agent (``_agent/``,
    bound in read-only), talked to over the attached stdin and stdout (not
    logged: a block's output is no business of the engine's log), started
    as root with AGENT_CAPABILITIES alone, and blocks run as ``user``;
    else the keep-alive as ``user``, and each block a ``docker exec``.
    With ``limits.network`` (the agent's alone: ``agent`` must be true),
    Docker's bridge, narrowed by the routing rules the agent installs at
    its start (``_agent/egress.py``: CAP_NET_ADMIN until then), which make
    the forbidden ranges and ``host_addresses`` unreachable."""
    overhead = AGENT_OVERHEAD_PROCESSES if agent else OVERHEAD_PROCESSES
    settings = confined(
        image=image,
        user=AGENT_USER if agent else user,
        memory_mb=memory_mb,
        pids=max_processes + overhead,
        cpus=limits.cpus,
        tmp_size_mb=tmp_size_mb,
        auto_remove=auto_remove,
        runtime=runtime,
        name=name,
        labels={LABEL_KEEP: "1"} if keep else {},
    )
    mounts = _workspace_mounts(workspace, volumes)
    if limits.network and not agent:
        raise ConfigurationError("the network on needs the agent: it installs the container's routing rules")
    command = [*AGENT_COMMAND, user] if agent else list(KEEPALIVE)
    if agent:
        _start_the_agent(settings, mounts)
    if limits.network:
        _open_the_network(settings, mounts, command, host_addresses)
    settings.update(
        {
            # the engine's init reaps orphans; the agent (or the keep-alive) is its first child
            "command": command,
            "working_dir": WORKDIR,
            "environment": dict(env),
            "volumes": mounts,
            "network_mode": "bridge" if limits.network else "none",
            "memswap_limit": f"{memory_mb}m",  # no swap on top
            "cgroupns": "private",  # the block does not see the host's cgroup tree
            "ulimits": _file_limits(open_files, file_size_mb),
            "stop_signal": "SIGKILL",
        }
    )
    if runtime == "runsc":
        _count_processes_in_gvisor(settings, max_processes, max_processes + overhead)
    if device_requests:
        settings["device_requests"] = list(device_requests)
    return settings


def _workspace_mounts(workspace: str, volumes: Mapping[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """The workspace at WORKDIR, its .execbox/ read-only but for
    WRITABLE_INTERNAL, and the user's volumes."""
    internal = f"{WORKDIR}/{INTERNAL_DIR}"
    return {
        workspace: {"bind": WORKDIR, "mode": "rw"},
        os.path.join(workspace, INTERNAL_DIR): {"bind": internal, "mode": "ro"},
        **{
            os.path.join(workspace, INTERNAL_DIR, folder): {"bind": f"{internal}/{folder}", "mode": "rw"}
            for folder in WRITABLE_INTERNAL
        },
        **volumes,
    }


def _start_the_agent(settings: dict[str, Any], mounts: dict[str, dict[str, str]]) -> None:
    """The agent and run_file.py bound in read-only, its channel on the
    attached stdin (never logged), and the capabilities it needs to become
    the block user."""
    from docker.types import LogConfig

    mounts[str(AGENT_SOURCE)] = {"bind": AGENT_MOUNT, "mode": "ro"}
    mounts[str(RUN_FILE_SOURCE)] = {"bind": RUN_FILE_MOUNT, "mode": "ro"}
    settings.update(
        stdin_open=True, log_config=LogConfig(type=LogConfig.types.NONE), cap_add=list(AGENT_CAPABILITIES)
    )


def _open_the_network(
    settings: dict[str, Any],
    mounts: dict[str, dict[str, str]],
    command: list[str],
    host_addresses: Sequence[str],
) -> None:
    """What the agent needs to install the routing rules at its start: the
    netlink module, CAP_NET_ADMIN until then, and their config as its
    second argument."""
    mounts[str(NETLINK_SOURCE)] = {"bind": NETLINK_MOUNT, "mode": "ro"}
    settings["cap_add"].append(EGRESS_CAPABILITY)
    command.append(json.dumps({"netlink": NETLINK_MOUNT, "host_addresses": list(host_addresses)}))


def _file_limits(open_files: int, file_size_mb: int) -> list[Any]:
    from docker.types import Ulimit

    return [
        Ulimit(name="nofile", soft=open_files, hard=open_files),
        Ulimit(name="fsize", soft=file_size_mb * 1024 * 1024, hard=file_size_mb * 1024 * 1024),
    ]


def _count_processes_in_gvisor(settings: dict[str, Any], max_processes: int, in_sandbox: int) -> None:
    """gVisor's own threads count against the host pids limit (~55 idle,
    ~430 with 60 processes inside): a tight one crashes the sandbox. The
    block's processes are counted by gVisor's kernel instead."""
    from docker.types import Ulimit

    settings["pids_limit"] = 8 * max_processes + 512
    settings["ulimits"].append(Ulimit(name="nproc", soft=in_sandbox, hard=in_sandbox))


def confined(
    *,
    image: str,
    user: str,
    memory_mb: int,
    pids: int,
    cpus: float | None,
    tmp_size_mb: int,
    auto_remove: bool,
    runtime: str | None,
    name: str | None,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The confinement every execbox container gets (an executor's, a
    Jupyter server's): Docker's init, a non-root user, a read-only root with
    a tmpfs /tmp, no capabilities, no-new-privileges, memory, pids and CPU
    limits, and the owner label the orphan clean-up reads."""
    settings: dict[str, Any] = {
        "image": image,
        "init": True,
        "detach": True,
        "user": user,
        "mem_limit": f"{memory_mb}m",
        "pids_limit": pids,
        "read_only": True,
        "tmpfs": {"/tmp": f"rw,nosuid,nodev,size={tmp_size_mb}m,mode=1777"},
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges"],
        "auto_remove": auto_remove,
        "labels": {LABEL_OWNER: owner_label(), **labels},
    }
    if cpus is not None:
        settings["nano_cpus"] = int(cpus * 1e9)
    if runtime:
        settings["runtime"] = runtime
    if runtime == "runsc":
        # runsc gives a container's stdio to its sandbox user (65534); a
        # detached container's stdin is otherwise the host's /dev/null.
        settings["stdin_open"] = True
    if name:
        settings["name"] = name
    return settings


def merge_overrides(settings: dict[str, Any], overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """``container_create_kwargs`` on top of ours; a warning names each of
    our settings it replaces (the hardening ones matter)."""
    if not overrides:
        return settings
    replaced = sorted(k for k in overrides if k in settings and overrides[k] != settings[k])
    if replaced:
        warnings.warn(
            f"container_create_kwargs replaces execbox's settings {', '.join(replaced)}: "
            "the container is less confined than the defaults if these loosen them",
            UserWarning,
            stacklevel=5,
        )
    return {**settings, **overrides}


def normalize_volumes(volumes: Mapping[str, Any] | Iterable[str] | None) -> dict[str, dict[str, str]]:
    """Docker SDK style {host: {"bind": path, "mode": "ro"}} or {host: path},
    or "host:container[:mode]" strings; host paths made absolute."""
    found: dict[str, dict[str, str]] = {}
    if volumes is None:
        return found
    if isinstance(volumes, Mapping):
        items = list(volumes.items())
    else:
        items = []
        for spec in volumes:
            parts = str(spec).split(":")
            if len(parts) not in (2, 3):
                raise ConfigurationError(f"volume {spec!r}: write it as 'host_path:container_path[:ro|rw]'")
            items.append((parts[0], {"bind": parts[1], "mode": parts[2] if len(parts) == 3 else "rw"}))
    for host, target in items:
        if isinstance(target, str):
            target = {"bind": target, "mode": "rw"}
        if not isinstance(target, Mapping) or "bind" not in target:
            raise ConfigurationError(
                f"volume {host!r}: give the container path as {{'bind': '/data', 'mode': 'ro'}}"
            )
        if target.get("mode", "rw") not in ("ro", "rw"):
            raise ConfigurationError(
                f"volume {host!r}: mode must be 'ro' or 'rw', got {target.get('mode')!r}"
            )
        if target["bind"].rstrip("/") == WORKDIR:
            raise ConfigurationError(
                f"volume {host!r}: {WORKDIR} is where the workspace is mounted; pick another path"
            )
        found[os.path.abspath(os.path.expanduser(host))] = {
            "bind": target["bind"],
            "mode": target.get("mode", "rw"),
        }
    return found


def hand_over(root: str, user: str, paths: Iterable[str] = ()) -> None:
    """When the host is root, give the identity blocks run as (``user``
    when numeric, else nobody) the workspace folder and the given paths in
    it with the folders leading to them, so that blocks can write where
    execbox wrote. By descriptor, never following a link a block planted
    (``_ownership.hand_over``); a failure is left alone: a block that
    cannot write there sees its own error."""
    if os.getuid() != 0:
        return
    uid, _, gid = user.partition(":")
    if not (uid.isdigit() and (gid.isdigit() or not gid)):
        uid, _, gid = NOBODY.partition(":")
    try:
        _ownership.hand_over(root, int(uid), int(gid or uid), paths)
    except OSError:
        pass


def owner_label() -> str:
    """This process, as host:pid:start time (a reused pid does not match)."""
    return f"{socket.gethostname()}:{os.getpid()}:{_start_time(os.getpid())}"


def _start_time(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "?"


_reaped: set[int] = set()
_reap_lock = threading.Lock()


def reap_orphans(client: Any) -> None:
    """Remove, once per process and engine, the containers of execbox
    executors whose owning process on this host has died (a SIGKILLed host
    cannot stop its containers)."""
    with _reap_lock:
        if id(client) in _reaped:
            return
        host = socket.gethostname()
        try:
            # sparse: the list's own answer carries the labels; inspecting each container
            # after listing fails whole when another process removes one in between
            containers = client.containers.list(
                all=True, filters={"label": LABEL_OWNER}, sparse=True, ignore_removed=True
            )
        except Exception:  # noqa: BLE001 - clean-up is best effort; the next start tries again
            return
        _reaped.add(id(client))
    try:
        networks = client.networks.list(filters={"label": LABEL_OWNER})
    except Exception:  # noqa: BLE001
        networks = []
    for thing in [*containers, *networks]:  # containers first: a network in use cannot go
        labels = thing.attrs.get("Labels") or thing.attrs.get("Config", {}).get("Labels") or {}
        owner_host, _, rest = labels.get(LABEL_OWNER, "").partition(":")
        pid, _, started = rest.partition(":")
        if owner_host != host or labels.get(LABEL_KEEP) or not pid.isdigit():
            continue
        if _start_time(int(pid)) == started:
            continue  # its owner lives
        try:
            thing.remove(**({"force": True} if thing in containers else {}))
        except Exception:  # noqa: BLE001
            pass


_live: weakref.WeakSet[Any] = weakref.WeakSet()


def track(executor: Any) -> None:
    """Stop the executor's container when the interpreter exits."""
    _live.add(executor)


@atexit.register
def _stop_all() -> None:
    for executor in list(_live):
        try:
            executor.close()
        except Exception:  # noqa: BLE001 - at exit, nothing to report to
            pass


def gpu_requests(gpus: tuple[str, ...] | None) -> list[Any]:
    """``gpus`` (parsed: ``execbox._gpus.parse_gpus``) as the engine's
    device requests, what ``docker run --gpus`` sends: every GPU, or those
    named by index or UUID."""
    if gpus is None:
        return []
    from docker.types import DeviceRequest

    if gpus == ("all",):
        return [DeviceRequest(count=-1, capabilities=[["gpu"]])]
    return [DeviceRequest(device_ids=list(gpus), capabilities=[["gpu"]])]
