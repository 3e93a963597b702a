"""Each test file's time budget, and the report every run prints: the ten
slowest tests, and the files that spent more than their budget.

A budget is a design decision, not a timed assertion: nothing fails when a
file goes over. The report names the file, what it spent and its budget,
so a drift is seen the day it happens; a file earns a larger budget here,
with the reason beside it, or gets faster. Seconds are summed over the
file's tests (setup, call and teardown) as pytest's reports give them, on
whichever worker ran them: on this 2-core machine, under ``./dev.sh test``'s
workers.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

__all__ = ["BUDGET_S", "DEFAULT_BUDGET_S", "over_budget", "slowest"]

DEFAULT_BUDGET_S = 30.0
# a test file (its path under tests/) -> its budget in seconds, and why it needs more than the default
BUDGET_S: dict[str, float] = {
    "test_cgroup2_vm.py": 420.0,  # three TCG guests, each a pytest run of the sandbox's promises
    "security/test_as_user.py": 240.0,  # the battery again, as a user who is not root
    "security/test_fresh_container.py": 600.0,  # apt and pip in a fresh Debian container
    "test_ray_cluster.py": 120.0,  # a three-node Ray cluster started and stopped
    "test_dev_run.py": 180.0,  # ./dev.sh run in a fresh checkout: a venv and its install
    "security/test_successor.py": 90.0,  # 52 pairs of blocks over four sandbox modes
    "backends/test_sandbox_pool_load.py": 60.0,  # a burst of 640 blocks and a stuck zygote, twice
    # the hostile battery and the contract suite: every attempt on every backend and mode (measured
    # under ./dev.sh test's workers, 2026-11-28, and given a fifth more)
    "security/test_processes.py": 330.0,
    "contract/test_contract.py": 280.0,
    "security/test_kernel.py": 220.0,
    "security/test_resources.py": 190.0,
    "security/test_files.py": 185.0,
    "security/test_host_side.py": 140.0,
    "security/test_network.py": 110.0,
    "security/test_docker_frames.py": 95.0,
    "security/test_tenants.py": 80.0,
    "security/test_identity.py": 50.0,
    "security/test_judge_forgery.py": 45.0,
    "hosts/test_promise.py": 40.0,
    "contract/test_streaming.py": 40.0,
    # a kernel, a container or a browser started per test; HumanEval's 164 per backend; every toolchain
    "backends/test_jupyter.py": 80.0,
    "backends/test_docker_agent.py": 65.0,
    "backends/test_docker.py": 40.0,
    "playground/test_playground.py": 60.0,
    "eval/test_humaneval.py": 75.0,
    "backends/test_languages.py": 60.0,
    "eval/test_judge_languages.py": 75.0,  # every compiled language built, alone on a busy machine 64 s
    "backends/test_sandbox_stateful.py": 50.0,
    "test_readme.py": 90.0,  # every Python example of the README run; alone on a busy machine 74 s
}


def _file(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return path.removeprefix("tests/")


def slowest(reports: list[Any], count: int = 10) -> list[tuple[float, str]]:
    """The ``count`` slowest tests: (seconds, node id), setup to teardown."""
    by_test: dict[str, float] = defaultdict(float)
    for report in reports:
        by_test[report.nodeid] += getattr(report, "duration", 0.0)
    return sorted(((s, n) for n, s in by_test.items()), reverse=True)[:count]


def over_budget(reports: list[Any]) -> list[tuple[str, float, float]]:
    """The files over their budget: (file, seconds spent, budget), the worst first."""
    by_file: dict[str, float] = defaultdict(float)
    for report in reports:
        by_file[_file(report.nodeid)] += getattr(report, "duration", 0.0)
    found = [(f, s, BUDGET_S.get(f, DEFAULT_BUDGET_S)) for f, s in by_file.items()]
    return sorted(((f, s, b) for f, s, b in found if s > b), key=lambda x: x[2] - x[1])


def report(terminalreporter: Any) -> None:
    """The lines every run ends with (conftest's ``pytest_terminal_summary``)."""
    # every phase's report (a passed setup or teardown is filed under "")
    reports = [
        r
        for found in terminalreporter.stats.values()
        for r in found
        if getattr(r, "nodeid", "") and hasattr(r, "duration") and getattr(r, "when", None)
    ]
    if not reports:
        return
    write = terminalreporter.write_line
    terminalreporter.section("the ten slowest tests (tests/_budgets.py)")
    for seconds, nodeid in slowest(reports):
        write(f"{seconds:7.1f}s  {nodeid}")
    over = over_budget(reports)
    if over:
        terminalreporter.section("files over their time budget (tests/_budgets.py)")
        for name, seconds, budget in over:
            write(
                f"{name}: {seconds:.0f} s, budget {budget:.0f} s: make it faster, or give it a "
                "budget in tests/_budgets.py with the reason"
            )
