"""A Kernel Gateway in a container (DockerJupyterServer) driven by the
gateway client: state, rich outputs, isolation, clean-up."""

from __future__ import annotations

import time

import pytest

from execbox import CodeBlock, DockerJupyterServer, JupyterExecutor, Limits
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
    assert {b["HostIp"] for b in ports["8888/tcp"]} == {"127.0.0.1"}
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
