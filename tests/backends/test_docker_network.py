"""The docker backend's network on (``Limits(network=True)``): the internet,
not this machine. The agent installs the container's routing rules before any
block runs (``docker/_agent/egress.py``) and keeps no CAP_NET_ADMIN after;
a container that cannot hold them (no agent, gVisor's netstack) does not
start with the network on. (What a block then reaches and cannot: the hostile
battery, tests/security/test_network.py.)"""

from __future__ import annotations

import textwrap

import pytest

from execbox import BackendUnavailableError, CodeBlock, ConfigurationError, DockerExecutor, Limits
from execbox._netlink import FORBIDDEN
from tests.conftest import require, require_docker

pytestmark = pytest.mark.usefixtures("docker_ready")
NETWORK_ON = Limits(network=True, timeout_s=30)


@pytest.fixture
def docker_ready():
    require_docker()


@pytest.fixture
def client():
    from execbox._docker_engine import docker_client

    return docker_client()


# What a block sees of the container's routing rules (a route netlink dump, RTM_GETRULE: no capability
# needed to read them) and of the capabilities: its own and the agent's
RULES_AND_CAPABILITIES = textwrap.dedent("""
    import os, socket, struct
    def rules(family):
        found = []
        with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0) as s:
            s.settimeout(5)
            s.bind((0, 0))
            s.send(struct.pack("=IHHII", 28, 34, 0x1 | 0x300, 1, 0) + struct.pack("=BBBBBBBBI", family, *[0] * 8))
            while True:
                data = s.recv(1 << 16)
                while len(data) >= 16:
                    length, kind = struct.unpack_from("=IH", data)
                    if kind in (2, 3):
                        return found
                    body, attrs = data[16:length], {}
                    rest = body[12:]
                    while len(rest) >= 4:
                        size, attr = struct.unpack_from("=HH", rest)
                        attrs[attr] = rest[4:size]
                        rest = rest[(size + 3) & ~3:]
                    found.append((body[7], body[1], attrs))
                    data = data[(length + 3) & ~3:]
    for family in (socket.AF_INET, socket.AF_INET6):
        found = rules(family)
        print(family, "unreachable", sum(1 for action, _, _ in found if action == 7))
        for action, prefix, attrs in found:
            if 24 in attrs:  # FRA_DPORT_RANGE: the DNS rules
                print("dns", socket.inet_ntoa(attrs[1]), prefix, attrs[22][0], struct.unpack("=HH", attrs[24]))
    def caps(pid):
        status = dict(l.split(":", 1) for l in open("/proc/%s/status" % pid).read().splitlines())
        return [int(status[k], 16) for k in ("CapEff", "CapPrm", "CapBnd")]
    def argv(pid):
        return open("/proc/%s/cmdline" % pid, "rb").read().split(b"\\0")
    agent = [p for p in os.listdir("/proc") if p.isdigit() and argv(p)[0] == b"python3" and b"agent.py" in argv(p)[2]]
    print("block", caps("self"), "agent", caps(agent[0])[1] >> 12 & 1)
    print(open("/etc/resolv.conf").read())
""")


def test_network_on_the_agent_installs_the_rules_and_keeps_no_net_admin(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws", limits=NETWORK_ON) as ex:
        result = ex.run(CodeBlock("python", RULES_AND_CAPABILITIES))
        host = client.api.inspect_container(ex.container_id)["HostConfig"]
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    # every forbidden IPv4 range and each of the host's addresses unreachable, and all of IPv6
    (ipv4,) = [line for line in lines if line.startswith("2 unreachable")]
    assert int(ipv4.split()[-1]) >= len([f for f in FORBIDDEN if ":" not in f]) + 1, result.output
    assert any(line.startswith("10 unreachable") and int(line.split()[-1]) >= 1 for line in lines), (
        result.output
    )
    # DNS: to each nameserver of the container's resolv.conf alone, UDP (17) and TCP (6) port 53
    servers = [line.split()[1] for line in lines if line.startswith("nameserver ") and "." in line]
    dns = sorted(line for line in lines if line.startswith("dns "))
    assert dns == sorted(f"dns {s} 32 {proto} (53, 53)" for s in servers for proto in (6, 17)), result.output
    # a block holds no capability; the agent dropped CAP_NET_ADMIN once the rules were in
    assert "block [0, 0, 0] agent 0" in result.output
    assert host["NetworkMode"] == "bridge"
    assert sorted(host["CapAdd"]) == ["NET_ADMIN", "SETGID", "SETPCAP", "SETUID"]


def test_network_off_adds_no_net_admin(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws") as ex:
        host = client.api.inspect_container(ex.container_id)["HostConfig"]
    assert host["NetworkMode"] == "none" and "NET_ADMIN" not in host["CapAdd"]


def _running(client) -> set[str]:
    """This process's running containers (its owner label): other pytest workers' come and go."""
    from execbox.backends.docker import container_kit

    label = f"{container_kit.LABEL_OWNER}={container_kit.owner_label()}"
    return {c.id for c in client.containers.list(filters={"label": label})}


def test_network_on_without_the_agent_does_not_start(tmp_path, client):
    # python3 out of reach (PATH holds only sh, sleep and cat): no agent, so no rules; blocks never get
    # Docker's bridge as it is (it reaches the host)
    programs = tmp_path / "bin"
    programs.mkdir()
    programs.chmod(0o755)
    for name in ("sh", "sleep", "cat"):
        (programs / name).symlink_to(f"/bin/{name}")
    before = _running(client)
    ex = DockerExecutor(
        workspace=tmp_path / "ws",
        limits=NETWORK_ON,
        env={"PATH": "/opt/bin"},
        volumes={str(programs): {"bind": "/opt/bin", "mode": "ro"}},
    )
    with pytest.raises(BackendUnavailableError, match=r"needs execbox's agent .*no python3.*network=False"):
        ex.start()
    ex.close()
    assert _running(client) <= before  # the container that found no python3 is gone


def test_network_on_without_net_admin_does_not_start(tmp_path, client):
    # the capability taken away by the caller's settings: the agent cannot install the rules, and says so
    ex = DockerExecutor(
        workspace=tmp_path / "ws",
        limits=NETWORK_ON,
        container_create_kwargs={"cap_add": ["SETUID", "SETGID", "SETPCAP"]},
    )
    with pytest.warns(UserWarning, match="cap_add"):
        with pytest.raises(
            BackendUnavailableError, match=r"routing rules could not be installed .*network=False"
        ):
            ex.start()
    ex.close()


def test_network_on_under_gvisor_is_refused(tmp_path, client):
    require(
        "gVisor", "runsc" in client.info().get("Runtimes", {}), "scripts/docker-engine.sh registers runsc"
    )
    ex = DockerExecutor(workspace=tmp_path / "ws", runtime="runsc", limits=NETWORK_ON)
    with pytest.raises(BackendUnavailableError, match=r"gVisor's network stack has no routing rules"):
        ex.start()
    ex.close()


@pytest.mark.parametrize("shared", ["host", "container:someone"])
def test_network_on_in_a_shared_network_namespace_is_refused(tmp_path, shared):
    # the rules would go in the host's namespace (or another container's), which must not be touched
    ex = DockerExecutor(
        workspace=tmp_path / "ws", limits=NETWORK_ON, container_create_kwargs={"network_mode": shared}
    )
    with pytest.warns(UserWarning, match="network_mode"):
        with pytest.raises(ConfigurationError, match=r"network_mode=.*leave network_mode to execbox"):
            ex.start()
    ex.close()
