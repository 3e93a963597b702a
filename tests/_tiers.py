"""The test tiers: which markers each collected test gets, from its file
and from the backend or battery mode it runs on.

``./dev.sh test`` runs everything (CI). ``./dev.sh test --fast`` leaves out
the tests marked with any of ``SLOW_TIER``: what needs a VM, the Docker
engine, gVisor, a browser, a nested pytest run, a soak or a package
install, and the contract suite and hostile battery on the backends past
the fast tier's (``local`` and the sandbox's pool for the contract suite,
the pool and Landlock for the battery). The markers are registered in
``pyproject.toml``; ``pytest -m docker`` and the like select one kind.
``alone`` is not a tier: ``./dev.sh test`` runs those tests (soaks, bursts)
after the others, in one process, since they judge a load they make.
"""

from __future__ import annotations

from typing import Any

SLOW_TIER = ("vm", "docker", "gvisor", "browser", "nested", "slow", "wide")
FAST_EXPRESSION = "not (" + " or ".join(SLOW_TIER) + ")"

# a test file (its path under tests/, or a folder ending in /) -> its markers
BY_PATH: dict[str, tuple[str, ...]] = {
    # alone: a TCG guest, a Ray cluster's start-up deadlines: beside the workers, past their limits
    "test_cgroup2_vm.py": ("vm", "nested", "alone"),
    "test_ray_cluster.py": ("nested", "alone"),
    "ray/": ("nested",),
    "security/test_as_user.py": ("nested",),
    "security/test_container_host.py": ("docker", "nested"),
    "security/test_fresh_container.py": ("docker", "nested", "slow"),  # apt and pip in a fresh Debian
    "security/test_docker_host.py": ("docker",),
    "security/test_docker_frames.py": ("docker",),
    "security/test_judge_docker.py": ("docker",),
    "playground/": ("browser",),
    "papers/": ("docker",),
    "backends/test_docker.py": ("docker",),
    "integrations/test_integrations_peer_docker.py": ("docker",),
    "backends/test_docker_agent.py": ("docker",),
    "backends/test_docker_engine.py": ("docker",),
    "backends/test_docker_images.py": ("docker",),
    "backends/test_docker_jupyter.py": ("docker",),
    "backends/test_docker_languages.py": ("docker",),
    "backends/test_docker_network.py": ("docker",),
    "backends/test_docker_progress.py": ("docker",),
    "backends/test_soak_docker.py": ("docker", "slow", "alone"),
    "backends/test_soak_sandbox.py": ("slow", "alone"),
    "backends/test_soak_jupyter.py": ("slow", "alone"),
    "backends/test_sandbox_pool_load.py": ("slow",),
    "test_dev_run.py": ("slow",),  # a fresh venv from the package index
    "cli/test_cli_chat_packages.py": ("slow",),  # a venv with a package from the index
    "server/test_soak.py": ("slow", "alone"),
    "backends/test_typescript_build.py": ("wide",),  # a toolchain past the fast tier's (esbuild, tsc)
    "backends/test_jupyter.py": ("wide",),
    "backends/test_jupyter_gateway.py": ("wide",),
    "server/test_jupyter_session.py": ("wide",),
}

# the contract suite's backends and the battery's modes in the fast tier; the rest are "wide"
FAST_BACKENDS = frozenset({"local", "sandbox"})
FAST_MODES = frozenset({"pool", "landlock"})
# the language matrices run every toolchain of the table; the fast tier the ones `./dev.sh test
# --fast` installs on a fresh Debian (Python, the shells, gcc and g++), the rest are "wide"
LANGUAGE_MATRICES = ("backends/test_languages.py", "eval/test_judge_languages.py")
FAST_LANGUAGES = frozenset({"python", "bash", "sh", "c", "cpp"})

# a test file -> (a fixture's name, its params past the fast tier's): the same tests again on a
# variant that differs in one place; the fast tier keeps the first variant
WIDE_PARAMS: dict[str, tuple[str, frozenset[str]]] = {
    # the GPU session's unit (no PID namespace of its own), with a faked driver
    "backends/test_sandbox_stateful.py": ("session", frozenset({"gpu"})),
}


def markers_for(relative: str, params: dict[str, Any]) -> set[str]:
    """The tier markers of a test in ``relative`` (a path under tests/) run with ``params``."""
    found: set[str] = set()
    for prefix, names in BY_PATH.items():
        if relative == prefix or (prefix.endswith("/") and relative.startswith(prefix)):
            found.update(names)
    backend = params.get("make_executor", params.get("mode"))
    fast = FAST_BACKENDS if "make_executor" in params else FAST_MODES
    if isinstance(backend, str):
        if backend.startswith("docker"):
            found.add("docker")
        if backend == "docker-gvisor":
            found.add("gvisor")
        if backend not in fast:
            found.add("wide")
    language = params.get("language")
    if relative in LANGUAGE_MATRICES and isinstance(language, str) and language not in FAST_LANGUAGES:
        found.add("wide")
    wide = WIDE_PARAMS.get(relative)
    if wide is not None and params.get(wide[0]) in wide[1]:
        found.add("wide")
    if any(value == "runsc" for value in params.values() if isinstance(value, str)):
        found.update(("docker", "gvisor"))
    return found
