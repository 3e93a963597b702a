"""Fixtures of the hostile-code battery.

``MODES`` maps a mode name to a factory ``(workspace, limits) -> Executor``;
every test runs once per mode. A new mode (the warm pool) joins by adding one
entry. ``hostile`` yields a started executor of the mode under test;
``run_then_healthy`` runs an attack, then proves the same executor still runs
ordinary code.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from execbox import CodeBlock, ExecutionResult, Executor, JupyterExecutor, Limits, SandboxExecutor, Workspace
from execbox.backends.sandbox import find_bwrap
from tests.conftest import require

Factory = Callable[[Workspace, Limits], Executor]

MODES: dict[str, Factory] = {
    "pool": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits),  # the default
    "oneshot": lambda ws, limits: SandboxExecutor(workspace=ws, limits=limits, pool=False),
    # the jailed Jupyter kernel: one kernel lives through every block
    "jupyter": lambda ws, limits: JupyterExecutor(workspace=ws, limits=limits, kernel="sandbox"),
}

LIMITS = Limits(timeout_s=10, memory_mb=256, max_processes=64)


@pytest.fixture(params=sorted(MODES))
def make_hostile(request, tmp_path):
    """Build and start executors of the mode under test; closed afterwards."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    made: list[Executor] = []

    def make(limits: Limits = LIMITS) -> Executor:
        executor = MODES[request.param](Workspace(tmp_path / "ws"), limits)
        made.append(executor)
        executor.start()
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def hostile(make_hostile):
    return make_hostile()


@pytest.fixture
def secret(tmp_path) -> tuple[Path, str]:
    """A host file outside the workspace holding a random token."""
    token = f"execbox-secret-{secrets.token_hex(16)}"
    path = tmp_path / "secret.txt"
    path.write_text(token + "\n")
    return path, token


def run_then_healthy(executor: Executor, language: str, code: str) -> ExecutionResult:
    """Run the hostile ``code``, then an ordinary block on the same executor;
    return the hostile block's result."""
    result = executor.run(CodeBlock(language, code))
    healthy = executor.run(CodeBlock("python", "print(6*7)"))
    assert healthy.exit_code == 0, f"the executor did not survive:\n{healthy.output}"
    assert healthy.output == "42\n", f"the executor did not survive:\n{healthy.output}"
    return result
