"""The steps ``on_progress`` gets from the Docker paths, in order: an
image built and a container started (DockerExecutor), the gateway image,
its container and the gateway's answer (DockerJupyterServer), a kernel
started on it (JupyterExecutor)."""

from __future__ import annotations

import secrets

import pytest

from execbox import CodeBlock, DockerExecutor, DockerJupyterServer, DockerPython, JupyterExecutor
from execbox.images import BASE_ALIAS
from tests.conftest import require_docker


@pytest.fixture(autouse=True)
def docker_ready():
    require_docker()


def test_docker_executor_reports_the_build_then_the_container(tmp_path):
    from execbox._docker_engine import docker_client

    dockerfile = tmp_path / "image" / "Dockerfile"
    dockerfile.parent.mkdir()
    dockerfile.write_text(f"FROM {BASE_ALIAS}\nLABEL execbox.test={secrets.token_hex(6)}\n")  # a new image
    steps: list[str] = []
    environment = DockerPython(dockerfile=dockerfile)
    tag = environment.tag
    assert tag is not None
    try:
        with DockerExecutor(
            workspace=tmp_path / "ws", environment=environment, on_progress=steps.append
        ) as ex:
            assert ex.run(CodeBlock("python", "print(6 * 7)")).output == "42\n"
    finally:
        docker_client().images.remove(tag, force=True)
    building = steps.index(f"building {tag}")
    built = steps.index(f"built {tag}")
    assert any(s.startswith("Step ") for s in steps[building:built]), steps  # the build's own steps
    assert steps[built + 1 :] == [f"starting a container of {tag}"], steps


def test_docker_jupyter_server_reports_image_container_and_gateway(tmp_path):
    steps: list[str] = []
    kernel_steps: list[str] = []
    with DockerJupyterServer(packages=["matplotlib"], on_progress=steps.append) as server:
        with JupyterExecutor(kernel=server, workspace=tmp_path / "ws", on_progress=kernel_steps.append) as ex:
            assert ex.run(CodeBlock("python", "print(6 * 7)")).output == "42\n"
        gateway = server.connection_info.base_url  # while it runs: its address goes with its network
    started = [i for i, s in enumerate(steps) if s.startswith("starting the Jupyter container of ")]
    assert len(started) == 1, steps
    assert steps[started[0] + 1 :] == ["waiting for the Kernel Gateway to answer"], steps
    image = steps[started[0]].rsplit(" ", 1)[1]
    if f"building {image}" in steps:  # built now, not by an earlier run
        assert steps.index(f"building {image}") < steps.index(f"built {image}") < started[0]
    assert kernel_steps == [f"starting a Jupyter kernel on the gateway at {gateway}"], kernel_steps
