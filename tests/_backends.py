"""The one table of backends the tests run on: a name, what it needs on
this machine, and how to make an executor of it from a workspace and
limits.

The contract suite runs every name in ``CONTRACT`` (tests/contract), the
hostile battery the names in ``BATTERY`` under its own mode names
(tests/security), and ``make_executor(name, ...)`` in tests/conftest.py
builds any of them for a test of its own. A backend joins by adding one
entry here (and its name to the suites that apply).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from execbox import (
    DockerExecutor,
    Executor,
    JupyterExecutor,
    Limits,
    LocalExecutor,
    SandboxExecutor,
    Workspace,
)
from execbox.backends.sandbox import find_bwrap
from tests.conftest import remote_executor, require, require_docker

Factory = Callable[[Workspace, Limits], Executor]


@dataclass(frozen=True)
class Backend:
    make: Factory  # (workspace, limits) -> a new executor, not started
    require: Callable[[], None]  # skips (fails under EXECBOX_REQUIRE=all) when the machine lacks a part

    def build(self, workspace: Workspace, limits: Limits) -> Executor:
        self.require()
        return self.make(workspace, limits)


def _nothing() -> None:
    return None


def _bubblewrap() -> None:
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def _jupyter_kernel() -> None:
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")


def _jailed_kernel() -> None:
    _jupyter_kernel()
    _bubblewrap()


def _gateway() -> None:
    found = all(importlib.util.find_spec(m) for m in ("kernel_gateway", "websocket", "ipykernel"))
    require("kernel gateway", found, "pip install 'execbox[gateway]' (./dev.sh does)")


def _gvisor() -> None:
    require_docker()
    from execbox._docker_engine import docker_client

    require(
        "gVisor",
        "runsc" in docker_client().info().get("Runtimes", {}),
        "scripts/docker-engine.sh registers runsc with the engine",
    )


def _landlock() -> None:
    from execbox.backends.sandbox._landlock_tier import landlock_problem

    problem = landlock_problem()
    require("Landlock", problem is None, problem or "")


_servers: list[Any] = []


def _gateway_executor(workspace: Workspace, limits: Limits) -> Executor:
    from execbox import LocalJupyterServer

    if not _servers:  # one server for the session, as users share one (stopped at exit)
        _servers.append(LocalJupyterServer().start())
    return JupyterExecutor(workspace=workspace, limits=limits, kernel=_servers[0])


def _ray_executor(workspace: Workspace, limits: Limits) -> Executor:
    """On a real two-node cluster (sandbox on each node); only inside the
    network namespace of tests/test_ray_cluster.py (skipped elsewhere with
    a plain skip: that test is the one required)."""
    from tests.ray._cluster import ray_executor

    return ray_executor(workspace, limits)


BACKENDS: dict[str, Backend] = {
    "local": Backend(lambda ws, limits: LocalExecutor(workspace=ws, limits=limits), _nothing),
    # the warm pool, the default
    "sandbox": Backend(lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits), _bubblewrap),
    "sandbox-oneshot": Backend(
        lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, pool=False), _bubblewrap
    ),
    # one Python session in a pool unit lives through every block (no ipykernel)
    "sandbox-stateful": Backend(
        lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, stateful=True), _bubblewrap
    ),
    # the sandbox's second tier, where namespaces cannot be made: Landlock + seccomp + rlimits
    "sandbox-landlock": Backend(
        lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, isolation="landlock"), _landlock
    ),
    # the jailed kernel, the Jupyter default: one kernel lives through every block
    "jupyter": Backend(
        lambda ws, limits: JupyterExecutor(workspace=ws, limits=limits, kernel="sandbox"), _jailed_kernel
    ),
    "jupyter-local": Backend(
        lambda ws, limits: JupyterExecutor(workspace=ws, limits=limits, kernel="local"), _jupyter_kernel
    ),
    "jupyter-gateway": Backend(_gateway_executor, _gateway),
    # a hardened container kept running, the agent inside; runc, then gVisor
    "docker": Backend(lambda ws, limits: DockerExecutor(workspace=ws, limits=limits), require_docker),
    "docker-gvisor": Backend(
        lambda ws, limits: DockerExecutor(workspace=ws, limits=limits, runtime="runsc"), _gvisor
    ),
    # a RemoteExecutor on a real `execbox serve` (sandbox) on loopback, its workspace a mirror
    # (remote_executor requires the service's packages itself)
    "remote": Backend(remote_executor, _bubblewrap),
    "ray": Backend(_ray_executor, _nothing),
}

# the contract suite's backends (the Landlock tier's contract is the sandbox's, tested in
# tests/backends/test_landlock.py)
CONTRACT = (
    "docker",
    "docker-gvisor",
    "jupyter",
    "jupyter-gateway",
    "jupyter-local",
    "local",
    "ray",
    "remote",
    "sandbox",
    "sandbox-oneshot",
    "sandbox-stateful",
)

# the battery's mode -> its backend
BATTERY = {
    "pool": "sandbox",
    "oneshot": "sandbox-oneshot",
    "stateful": "sandbox-stateful",
    "jupyter": "jupyter",
    "docker": "docker",
    "docker-gvisor": "docker-gvisor",
    "landlock": "sandbox-landlock",
    "remote": "remote",
}


def make_executor(name: str, workspace: Workspace, limits: Limits) -> Executor:
    """An executor of the backend ``name``, after requiring what it needs."""
    return BACKENDS[name].build(workspace, limits)
