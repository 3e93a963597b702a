"""Shared test helpers.

``require(component, available, reason)``: a test whose component is absent
is skipped with the reason, unless EXECBOX_REQUIRE=all (CI), where it fails.

The tests mirror the packages (``tests/backends``, ``tests/agents``...); the
fakes at the protocol boundary (``fake_llm``, ``fake_anthropic``,
``fake_remyx``) and ``hostile_hosts`` stay here, importable from every folder.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

REQUIRE_ALL = os.environ.get("EXECBOX_REQUIRE", "") == "all"
# How much slower than this machine the tests run: the VM's guests set it (TCG runs 5-7x slower,
# another guest beside); the battery's short timeout grows with it.
TIME_SCALE = int(os.environ.get("EXECBOX_TEST_TIME_SCALE", "1") or 1)  # a whole factor


def require(component: str, available: bool, reason: str) -> None:
    if available and component == "bubblewrap":  # installed is not enough: it must make a jail here
        problem = bubblewrap_problem()
        available, reason = problem is None, problem or reason
    if available:
        return
    message = f"{component} is not available: {reason}"
    if REQUIRE_ALL:
        pytest.fail(f"EXECBOX_REQUIRE=all but {message}")
    pytest.skip(message)


_bubblewrap: list[str | None] = []


def bubblewrap_problem() -> str | None:
    """Why the sandbox's namespaces tier (bubblewrap) cannot run a block
    here, once per process (None: it can): a container started with the
    engine's defaults refuses it, though bwrap is installed (issue 40)."""
    if not _bubblewrap:
        from execbox.backends.sandbox._doctor import _try_tier

        ok, why = _try_tier("namespaces")
        _bubblewrap.append(None if ok else f"bubblewrap cannot make a jail here: {why}")
    return _bubblewrap[0]


def require_namespaces() -> None:
    """Skip (fail under EXECBOX_REQUIRE=all) unless the sandbox's namespaces tier runs here."""
    from execbox.backends.sandbox import find_bwrap

    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")


def remote_executor(workspace: Any, limits: Any) -> Any:
    """A RemoteExecutor on a real ``execbox serve`` (sandbox backend) on
    loopback, the server shared by the test run; ``workspace`` is its
    local mirror."""
    import importlib.util

    found = all(importlib.util.find_spec(m) for m in ("starlette", "uvicorn", "httpx"))
    require("the service", found, "pip install 'execbox[server]' (./dev.sh does)")
    from execbox import create_executor
    from execbox.backends.sandbox import find_bwrap
    from tests.server._http import shared_server

    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    server = shared_server(*REMOTE_SERVER)
    return create_executor("remote", url=server.url, token=server.token, workspace=workspace, limits=limits)


REMOTE_SERVER = ("--backend", "sandbox", "--max-concurrency", "16", "--max-sessions", "256")


def remote_token() -> str:
    """The token of the server ``remote_executor`` runs on (a remote
    executor's saved config never holds it: one loaded from it reads
    ``EXECBOX_TOKEN``, as a user's would)."""
    from tests.server._http import shared_server

    return str(shared_server(*REMOTE_SERVER).token)


def process_alive(pid: int) -> bool:
    """True if ``pid`` runs (a zombie waiting for its reaper counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state = stat.rsplit(")", 1)[1].split()[0]
    return state not in ("Z", "X")


def wait_dead(pids: list[int], timeout: float = 3.0) -> list[int]:
    """The pids still alive after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    alive = [p for p in pids if process_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = [p for p in alive if process_alive(p)]
    return alive


def marked(marker: str) -> list[int]:
    """Host pids (other than ours) whose command line carries ``marker``
    (pids inside a PID namespace mean nothing out here, command lines do)."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmdline:
                found.append(int(name))
    return found


def docker_problem() -> str | None:
    """Why the docker backend cannot run here (None: it can)."""
    try:
        from execbox._docker_engine import docker_client
        from execbox.images import base_tag

        client = docker_client()
    except Exception as exc:  # noqa: BLE001 - the reason is the message
        return str(exc)
    if not client.images.list(name=base_tag().split(":")[0]):
        return "the base image is not built: execbox images build (./dev.sh test does)"
    return None


def require_docker() -> None:
    problem = docker_problem()
    require("docker", problem is None, problem or "")


@pytest.fixture
def require_component():
    return require


def make_executor(kind: str, workspace, limits):  # type: ignore[no-untyped-def]
    """An executor of a backend of tests/_backends.py (local, sandbox, jupyter: the jailed kernel,
    remote: a sandbox behind a real server on loopback...), requiring what it needs."""
    from tests._backends import make_executor as make

    return make(kind, workspace, limits)


def import_error_without(missing: str, module: str) -> str:
    """What importing ``module`` says when the package ``missing`` is not
    installed (checked in a fresh interpreter that blocks it)."""
    import subprocess
    import sys

    code = (
        f"import sys\nsys.modules[{missing!r}] = None\nimport execbox.integrations\n"
        f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)\n"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


LONG_FIRST = ("vm", "nested", "slow")


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    """Each test's tier markers (tests/_tiers.py): ``./dev.sh test --fast`` leaves out the slow ones."""
    from tests._tiers import markers_for

    for item in items:
        relative = Path(str(item.fspath)).resolve().relative_to(TESTS).as_posix()
        params = getattr(getattr(item, "callspec", None), "params", {})
        for name in sorted(markers_for(relative, params)):
            item.add_marker(name)
    # The longest first, so that pytest-xdist's workers (./dev.sh test) do
    # not end waiting on one of them: the VM's guests, the nested runs, the soaks.
    items.sort(
        key=lambda item: next(
            (n for n, mark in enumerate(LONG_FIRST) if item.get_closest_marker(mark)), len(LONG_FIRST)
        )
    )


def pytest_terminal_summary(terminalreporter):  # type: ignore[no-untyped-def]
    """The ten slowest tests and the files over their time budget, every run (tests/_budgets.py)."""
    import _budgets

    _budgets.report(terminalreporter)
