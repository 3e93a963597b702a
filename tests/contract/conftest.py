"""The executor contract: every backend passes the same suite.

A backend joins by adding one entry to ``BACKENDS``: a name and a factory
``(workspace, limits) -> Executor``.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable

import pytest

from execbox import (
    DockerExecutor,
    Executor,
    JupyterExecutor,
    Limits,
    LocalExecutor,
    LocalJupyterServer,
    SandboxExecutor,
    Workspace,
)
from execbox.backends.sandbox import find_bwrap
from tests.conftest import remote_executor, require, require_docker

Factory = Callable[..., Executor]


def _local(workspace: Workspace, limits: Limits) -> Executor:
    return LocalExecutor(workspace=workspace, limits=limits)


def _sandbox(workspace: Workspace, limits: Limits) -> Executor:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=workspace, limits=limits)


def _sandbox_oneshot(workspace: Workspace, limits: Limits) -> Executor:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=workspace, limits=limits, pool=False)


def _sandbox_stateful(workspace: Workspace, limits: Limits) -> Executor:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return SandboxExecutor(workspace=workspace, limits=limits, stateful=True)


def _jupyter(workspace: Workspace, limits: Limits) -> Executor:
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    return JupyterExecutor(workspace=workspace, limits=limits, kernel="sandbox")


def _jupyter_local(workspace: Workspace, limits: Limits) -> Executor:
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    return JupyterExecutor(workspace=workspace, limits=limits, kernel="local")


_servers: list[LocalJupyterServer] = []


def _jupyter_gateway(workspace: Workspace, limits: Limits) -> Executor:
    found = all(importlib.util.find_spec(m) for m in ("kernel_gateway", "websocket", "ipykernel"))
    require("kernel gateway", found, "pip install 'execbox[gateway]' (./dev.sh does)")
    if not _servers:  # one server for the session, as users share one (stopped at exit)
        _servers.append(LocalJupyterServer().start())
    return JupyterExecutor(workspace=workspace, limits=limits, kernel=_servers[0])


def _remote(workspace: Workspace, limits: Limits) -> Executor:
    """A RemoteExecutor on a real ``execbox serve`` (sandbox backend) on
    loopback, one for the test run; the workspace is its local mirror."""
    return remote_executor(workspace, limits)


def _ray(workspace: Workspace, limits: Limits) -> Executor:
    """A RayExecutor on a real two-node cluster (sandbox on each node); only
    inside the network namespace of tests/test_ray_cluster.py (skipped here
    with a plain skip: that test is the one required)."""
    from tests.ray._cluster import ray_executor

    return ray_executor(workspace, limits)


def _docker(workspace: Workspace, limits: Limits) -> Executor:
    require_docker()
    return DockerExecutor(workspace=workspace, limits=limits)


def _docker_gvisor(workspace: Workspace, limits: Limits) -> Executor:
    require_docker()
    from execbox._docker_engine import docker_client

    require(
        "gVisor",
        "runsc" in docker_client().info().get("Runtimes", {}),
        "scripts/docker-engine.sh registers runsc with the engine",
    )
    return DockerExecutor(workspace=workspace, limits=limits, runtime="runsc")


BACKENDS: dict[str, Factory] = {
    "docker": _docker,  # runc
    "docker-gvisor": _docker_gvisor,
    "local": _local,
    "remote": _remote,  # a real server on loopback, sandbox backend
    "ray": _ray,  # a two-node Ray cluster on loopback, sandbox on each node
    "sandbox": _sandbox,  # the warm pool, its default
    "sandbox-oneshot": _sandbox_oneshot,
    "sandbox-stateful": _sandbox_stateful,  # one Python session in the jail, no ipykernel
    "jupyter": _jupyter,  # the sandboxed kernel, its default; stateful: where that changes
    "jupyter-local": _jupyter_local,  # an expectation, the test says so
    "jupyter-gateway": _jupyter_gateway,
}


@pytest.fixture(params=sorted(BACKENDS))
def make_executor(request, tmp_path):
    """Build executors of the backend under test; closes them afterwards."""
    made: list[Executor] = []

    def make(limits: Limits | None = None) -> Executor:
        executor = BACKENDS[request.param](Workspace(tmp_path / "ws"), limits or Limits(timeout_s=30))
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def executor(make_executor):
    return make_executor()
