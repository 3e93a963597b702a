"""A Kernel Gateway in a container (DockerJupyterServer) driven by the
gateway client: state, rich outputs, isolation, clean-up."""

from __future__ import annotations

import time

import pytest

from execbox import CodeBlock, DockerJupyterServer, JupyterExecutor, Limits
from execbox.backends.jupyter._docker_guard import RELAY_PORT
from tests.conftest import require_docker


@pytest.fixture(scope="module")
def server():
    require_docker()
    with DockerJupyterServer(packages=["matplotlib"]) as running:  # built by ./dev.sh
        yield running


def test_state_and_plots(server, tmp_path):
    with JupyterExecutor(kernel=server, workspace=tmp_path / "ws") as ex:
        ex.run(CodeBlock("python", "x = 41"))
        state = ex.run(CodeBlock("python", "print(x + 1)"))
        plot = ex.run(CodeBlock("python", "import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()"))
    assert state.output == "42\n"
    assert plot.exit_code == 0, plot.output
    images = [d for d in plot.displays if d.mime_type == "image/png"]
    assert len(images) == 1 and images[0].path in plot.files
    assert (tmp_path / "ws" / images[0].path).read_bytes()[:4] == b"\x89PNG"
    assert "MPLCONFIGDIR" not in plot.output


def test_kernels_are_confined(server, tmp_path):
    with JupyterExecutor(kernel=server, workspace=tmp_path / "ws") as ex:
        result = ex.run(
            CodeBlock(
                "python",
                (
                    "import os, socket\n"
                    "print(os.getuid())\n"
                    "try:\n"
                    "    socket.create_connection(('1.1.1.1', 53), timeout=1); print('online')\n"
                    "except OSError:\n"
                    "    print('offline')\n"
                    "try:\n"
                    "    open('/etc/x', 'w')\n"
                    "except OSError:\n"
                    "    print('read-only')\n"
                ),
            )
        )
    assert result.output == "65534\noffline\nread-only\n"


def test_network_asked_publishes_on_loopback_only(tmp_path):
    require_docker()
    with DockerJupyterServer(packages=["matplotlib"], limits=Limits(network=True)) as server:
        from execbox._docker_engine import docker_client

        ports = docker_client().api.inspect_container(server.container_id)["NetworkSettings"]["Ports"]
        with JupyterExecutor(kernel=server, workspace=tmp_path / "ws") as ex:
            result = ex.run(CodeBlock("python", "print('up')"))
        container_id = server.container_id
    assert result.output == "up\n"
    # the entry's relay is published (the gateway's own port answers no one off the container: its rules)
    assert {b["HostIp"] for b in ports[f"{RELAY_PORT}/tcp"]} == {"127.0.0.1"}
    assert not ports.get("8888/tcp")
    import docker

    with pytest.raises(docker.errors.NotFound):
        docker_client().api.inspect_container(container_id)  # stopped and removed


def test_a_wrong_token_is_refused(server):
    from execbox import JupyterConnectionInfo

    info = server.connection_info
    wrong = JupyterConnectionInfo(info.host, info.port, token="not-the-token")
    with pytest.raises(Exception, match="token"):
        with JupyterExecutor(kernel=wrong) as ex:
            ex.run(CodeBlock("python", "print(1)"))


def test_custom_image_that_breaks_the_contract(tmp_path):
    require_docker()
    from execbox import BackendUnavailableError
    from execbox.images import BASE_ALIAS

    with pytest.raises(BackendUnavailableError, match="contract"):
        DockerJupyterServer(custom_image_name=BASE_ALIAS).start()  # bash, no gateway: exits


def test_a_container_that_cannot_start_leaves_no_network(server):
    import docker

    from execbox import BackendUnavailableError

    client = docker.from_env()

    def ours() -> set[str]:
        return {n.name for n in client.networks.list() if n.name.startswith("execbox-jupyter-")}

    def unattached(names: set[str]) -> set[str]:
        """The networks of ``names`` that still exist with no container on them."""
        left = set()
        for name in names:
            try:
                network = client.networks.get(name)
            except docker.errors.NotFound:
                continue
            if not network.containers:
                left.add(name)
        return left

    before = ours()
    broken = DockerJupyterServer(packages=["matplotlib"], container_name="not a valid name!")
    with pytest.raises(BackendUnavailableError):
        broken.start()
    # other workers' servers may make networks meanwhile: theirs get a container within seconds, a
    # network left by the broken start never does
    new = ours() - before
    deadline = time.monotonic() + 30
    while (left := unattached(new)) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not left, f"networks left with no container: {sorted(left)}"


# ---- the network on: the internet, not this machine (jupyter/_docker_guard.py, _gateway_entry.py) ----

NETWORK_ON = Limits(network=True)


@pytest.fixture(scope="module")
def networked():
    require_docker()
    with DockerJupyterServer(packages=["matplotlib"], limits=NETWORK_ON) as running:
        yield running


@pytest.fixture(scope="module")
def online(networked, tmp_path_factory):
    """A kernel of the server with the network on."""
    with JupyterExecutor(kernel=networked, workspace=tmp_path_factory.mktemp("online")) as ex:
        yield ex


def _cell(ex, code: str) -> str:
    result = ex.run(CodeBlock("python", code))
    assert result.exit_code == 0, result.output
    return result.output


def _addresses_to_try(networked) -> list[str]:
    """This host's IPv4 addresses, the container's bridge gateway (the host) among them."""
    from execbox._docker_engine import docker_client
    from tests.security.test_network import _host_addresses

    networks = docker_client().api.inspect_container(networked.container_id)["NetworkSettings"]["Networks"]
    gateways = [n["Gateway"] for n in networks.values() if n.get("Gateway")]
    assert gateways, networks
    return list(dict.fromkeys([*_host_addresses(), *gateways]))


def test_network_on_a_kernel_does_not_reach_this_host(networked, online):
    from tests.security.test_network import CONNECT, TcpServer

    server = TcpServer(host="0.0.0.0")
    try:
        for address in _addresses_to_try(networked):
            output = _cell(online, CONNECT.format(host=address, port=server.port))  # a 3 s timeout
            assert "CONNECTED" not in output, address
            assert "failed" in output, address
    finally:
        server.close()
    assert server.accepted == []


def test_network_on_a_kernel_has_no_route_to_link_local(online):
    # the cloud metadata endpoint: refused at once (no route), not left to time out
    from tests.security.test_network import UNREACHABLE

    output = _cell(online, UNREACHABLE)
    assert output.split()[-1] in {"ENETUNREACH", "EHOSTUNREACH", "EACCES", "EPERM"}, output


def test_network_on_a_kernel_cannot_remove_the_rules(networked, online):
    from tests.security.test_network import CONNECT, REMOVE_RULES, TcpServer

    server = TcpServer(host="0.0.0.0")
    address = _addresses_to_try(networked)[0]
    try:
        removing = _cell(online, REMOVE_RULES.format(host=address, port=server.port))
        after = _cell(online, CONNECT.format(host=address, port=server.port))
    finally:
        server.close()
    assert "deleted 0 refused" in removing, removing
    assert "EPERM" in removing or "EACCES" in removing, removing
    assert "CONNECTED" not in removing + after, removing + after
    assert "failed" in after, after
    assert server.accepted == []


# the capability sets and no_new_privs of the kernel and of each of its ancestors but the engine's init: the
# gateway, the image's shell, the entry's relay (which holds the marked socket: not dumpable, so its
# descriptors are not the kernel's to open); and what the kernel gets when it marks a socket of its own
HOLDS = """
import os, socket
def status(pid):
    lines = open("/proc/%s/status" % pid).read().splitlines()
    return {k: v.strip() for k, v in (l.split(":", 1) for l in lines if ":" in l)}
SETS = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Uid")
pid, relay = str(os.getpid()), None
while pid != "1":
    found = status(pid)
    if b"gateway_entry.py" in open("/proc/%s/cmdline" % pid, "rb").read():
        relay = pid
    print("holds", " ".join("%s=%s" % (k, found[k].split()[0]) for k in SETS))
    pid = found["PPid"]
try:
    os.listdir("/proc/%s/fd" % relay)
    print("relay fds OPEN")
except OSError as exc:
    print("relay fds", type(exc).__name__)
try:
    socket.socket().setsockopt(socket.SOL_SOCKET, 36, 0x65786278)
    print("mark SET")
except OSError as exc:
    print("mark", type(exc).__name__)
"""


def test_network_on_a_kernel_holds_no_capability(networked, online):
    from execbox._docker_engine import docker_client

    host = docker_client().api.inspect_container(networked.container_id)["HostConfig"]
    output = _cell(online, HOLDS)
    none = "holds CapInh=0000000000000000 CapPrm=0000000000000000 CapEff=0000000000000000 "
    none += "CapBnd=0000000000000000 CapAmb=0000000000000000 NoNewPrivs=1 Uid=65534"
    held = [line for line in output.splitlines() if line.startswith("holds")]
    assert len(held) >= 3 and set(held) == {none}, output  # the kernel, the gateway, the relay at least
    assert "relay fds PermissionError" in output, output
    assert "mark PermissionError" in output, output
    # root with these alone at the start (then dropped: the entry), the bridge
    assert sorted(host["CapAdd"]) == ["NET_ADMIN", "SETGID", "SETPCAP", "SETUID"]
    assert host["CapDrop"] == ["ALL"] and host["NetworkMode"] in ("default", "bridge")


def test_network_off_adds_no_capability(server):
    from execbox._docker_engine import docker_client

    host = docker_client().api.inspect_container(server.container_id)["HostConfig"]
    config = docker_client().api.inspect_container(server.container_id)["Config"]
    assert not host["CapAdd"] and host["CapDrop"] == ["ALL"]
    assert config["User"] == "65534:65534"


def test_network_on_a_kernel_reaches_the_package_index(online):
    from tests.security.test_network import FETCH, reachable_package_index

    url = reachable_package_index()
    output = online.run(CodeBlock("python", FETCH.format(url=url))).output
    if output.startswith("UNTRUSTED"):
        return  # the index answered, with a certificate the image's CA store lacks (DNS and egress worked)
    assert "STATUS 200 True" in output, output


def _ours_running() -> set[str]:
    """This process's running containers (its owner label): other pytest workers' come and go."""
    from execbox._docker_engine import docker_client
    from execbox.backends.docker import container_kit

    label = f"{container_kit.LABEL_OWNER}={container_kit.owner_label()}"
    return {c.id for c in docker_client().containers.list(filters={"label": label})}


def test_network_on_without_python3_does_not_start(networked):
    # the image's python3 out of reach (PATH): no entry, so no rules; never the bridge as it is
    from execbox import BackendUnavailableError

    before = _ours_running()
    broken = DockerJupyterServer(packages=["matplotlib"], limits=NETWORK_ON, docker_env={"PATH": "/nowhere"})
    with pytest.raises(BackendUnavailableError, match=r"no python3 .*Limits\(network=False\)"):
        broken.start()
    assert _ours_running() <= before  # the container that found no python3 is gone


def test_network_on_under_gvisor_is_refused(networked):
    from execbox import BackendUnavailableError
    from execbox._docker_engine import docker_client
    from tests.conftest import require

    require(
        "gVisor",
        "runsc" in docker_client().info().get("Runtimes", {}),
        "scripts/docker-engine.sh registers runsc",
    )
    server = DockerJupyterServer(packages=["matplotlib"], limits=NETWORK_ON, runtime="runsc")
    with pytest.raises(
        BackendUnavailableError, match=r"gVisor's network stack has no routing rules.*network=False"
    ):
        server.start()
