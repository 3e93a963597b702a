"""Fixtures of the hostile-code battery.

``MODES`` maps a mode name to a factory ``(workspace, limits) -> Executor``
and ``REQUIRES`` to what it needs on this machine, both from the one table
of backends (``tests/_backends.py``: a new mode joins by a line in its
``BATTERY``); every test runs once per mode. A test
that does not apply to a mode skips it with ``not_for`` and the reason; one
whose intent holds with another detail (a container has its own /etc/passwd)
says so where it checks ``mode``. ``hostile`` yields a started executor of
the mode under test (``TIMING_OUT``'s shorter timeout for a test marked
``ends_by_timeout``); ``run_then_healthy`` runs an attack, then proves the
same executor still runs ordinary code.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path

import pytest

from execbox import CodeBlock, ExecutionResult, Executor, Limits, Workspace
from tests._backends import BACKENDS, BATTERY
from tests.conftest import TIME_SCALE

Factory = Callable[[Workspace, Limits], Executor]

# mode -> the factory of its backend (tests/_backends.py's BATTERY): pool (the default), oneshot,
# stateful (one interpreter in a pool unit lives through every block), jupyter (the jailed kernel),
# docker and docker-gvisor (the agent's container, runc and gVisor), landlock (the sandbox's second
# tier: Landlock + seccomp + rlimits), remote (a RemoteExecutor on a real `execbox serve` on loopback)
MODES: dict[str, Factory] = {mode: BACKENDS[name].make for mode, name in BATTERY.items()}
DOCKER_MODES = frozenset({"docker", "docker-gvisor"})
# the modes whose blocks see .execbox/ (the host's code files) read-only (remote: a pool behind HTTP;
# docker: but for .execbox/matplotlib, matplotlib's cache)
SEALED = frozenset({"pool", "oneshot", "stateful", "remote", "jupyter", "docker", "docker-gvisor"})


REQUIRES: dict[str, Callable[[], None]] = {mode: BACKENDS[name].require for mode, name in BATTERY.items()}

LIMITS = Limits(timeout_s=10, memory_mb=256, max_processes=64)
# For the attacks that end by the timeout: the same limits, a shorter wait (2 s: what a kill
# proves holds as well as after 10 s; each second here costs about two minutes of CI), longer in
# the VM's guests (TIME_SCALE: a one-shot block took 4 s there, its check after a bomb ran out).
TIMING_OUT = LIMITS.replace(timeout_s=2 * TIME_SCALE)

# The modules gVisor runs (within the battery's time budget): the attacks on
# host files, the network and the kernel's surface; those on processes and
# resources run under runc (mode docker).
GVISOR_MODULES = frozenset(
    {
        "test_executor",
        "test_files",
        "test_network",
        "test_kernel",
        "test_docker_host",
        "test_docker_frames",
        "test_host_side",
    }
)
# The modules the remote mode runs: what crosses HTTP and the mirror (files,
# the host's side, tenants, processes and floods); the jail behind it is the
# pool mode's, attacked there.
REMOTE_MODULES = frozenset(
    {"test_executor", "test_files", "test_host_side", "test_tenants", "test_processes", "test_resources"}
)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "ends_by_timeout: the attack ends by the timeout, which is shorter "
        "(TIMING_OUT in tests/security/conftest.py)",
    )
    config.addinivalue_line(
        "markers",
        "premise: checks what every attack of the battery relies on (runs even when the premise fails)",
    )


# mode -> None when its executor runs ordinary blocks one after another under
# the battery's limits, else what went wrong (checked once per session)
_premise: dict[str, str | None] = {}


def premise_problem(mode: str, tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """Why an executor of ``mode`` cannot run three ordinary blocks in a row
    under the battery's limits (None: it can)."""
    if mode not in _premise:
        with MODES[mode](Workspace(tmp_path_factory.mktemp(f"premise-{mode}")), LIMITS) as executor:
            outputs: list[str] = []
            while len(outputs) < 3 and outputs == ["42\n"] * len(outputs):  # a failing mode: stop
                outputs.append(executor.run(CodeBlock("python", "print(6*7)")).output)
        bad = [(n, out) for n, out in enumerate(outputs, 1) if out != "42\n"]
        _premise[mode] = f"block {bad[0][0]} of 3 printed {bad[0][1][:160]!r}" if bad else None
    return _premise[mode]


@pytest.fixture(params=sorted(MODES))
def mode(request) -> str:
    """The name of the mode under test."""
    return request.param


def not_for(mode: str, modes: str | set[str] | frozenset[str], reason: str) -> None:
    """Skip the test in ``modes`` (a name or a set of names): it does not apply there, for ``reason``."""
    if mode in ({modes} if isinstance(modes, str) else modes):
        pytest.skip(f"not for {mode}: {reason}")


@pytest.fixture
def make_hostile(request, mode, tmp_path, tmp_path_factory):
    """Build and start executors of the mode under test; closed afterwards.
    When the mode fails the premise (test_executor.py says how), its attacks
    are skipped: each would fail the same way, slowly."""
    module = request.module.__name__.rsplit(".", 1)[-1]
    if mode == "docker-gvisor" and module not in GVISOR_MODULES:
        pytest.skip(
            f"docker-gvisor runs {', '.join(sorted(GVISOR_MODULES))} (time budget); "
            "these attacks run under runc (mode docker)"
        )
    if mode == "remote" and module not in REMOTE_MODULES:
        pytest.skip(f"remote runs {', '.join(sorted(REMOTE_MODULES))}: the jail behind it is the pool mode's")
    REQUIRES[mode]()
    if not request.node.get_closest_marker("premise"):
        problem = premise_problem(mode, tmp_path_factory)
        if problem:
            pytest.skip(f"{mode} fails the premise (see test_executor.py): {problem}")
    made: list[Executor] = []

    def make(limits: Limits = LIMITS) -> Executor:
        executor = MODES[mode](Workspace(tmp_path / "ws"), limits)
        made.append(executor)
        executor.start()
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def hostile(request, make_hostile):
    """An executor of the mode under test; with ``TIMING_OUT`` for a test
    marked ``ends_by_timeout``."""
    return make_hostile(TIMING_OUT if request.node.get_closest_marker("ends_by_timeout") else LIMITS)


@pytest.fixture
def secret(tmp_path) -> tuple[Path, str]:
    """A host file outside the workspace holding a random token."""
    token = f"execbox-secret-{secrets.token_hex(16)}"
    path = tmp_path / "secret.txt"
    path.write_text(token + "\n")
    return path, token


# What the Docker backend says when it had to kill its container (a fork bomb
# filled the pids limit, so not even its in-container killer could start).
RESTARTED = "Note: the container had stopped"


def run_then_healthy(
    executor: Executor, language: str, code: str, *, may_restart: bool = False
) -> ExecutionResult:
    """Run the hostile ``code``, then an ordinary block on the same executor;
    return the hostile block's result. ``may_restart``: the Docker backend
    may have replaced its container, which it must say."""
    result = executor.run(CodeBlock(language, code))
    healthy = executor.run(CodeBlock("python", "print(6*7)"))
    output = healthy.output
    if may_restart and output.startswith(RESTARTED):
        output = output.split("\n", 1)[1]
    assert healthy.exit_code == 0, f"the executor did not survive:\n{healthy.output}"
    assert output == "42\n", f"the executor did not survive:\n{healthy.output}"
    return result
