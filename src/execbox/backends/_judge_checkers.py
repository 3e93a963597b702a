"""The checkers' own executor: one per judgement that has a checker, so
that the program under judgement can neither see nor touch them.

It is made of the program's executor's backend, options and limits, with
a temporary workspace of its own (never bound into the program's jail or
container: as root, the sandbox leases it a jail id of its own), no stateful
session, no GPUs, no host functions, no warm modules, and code files
removed as each checker has run. The judge starts it and builds every
compiled checker in it before the program's first case, and closes it
when the judgement ends (``_judging``). Only checkers run there: nothing
the program printed reaches it but as a checker's stdin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._executor_api import ExecutorLike

__all__ = ["checker_executor"]

# what the program's executor holds for its own blocks alone
_HELD = (
    "workspace",
    "stateful",
    "gpus",
    "device_requests",
    "preload",
    "functions",
    "functions_module",
    "container_name",
    "keep_code_files",
)
# a backend's own options for a checkers' executor
_OWN: dict[str, Callable[[Any], dict[str, Any]]] = {
    # one unit ready (checkers run one at a time); the tier the program's runs in
    "sandbox": lambda ex: {"pool_size": 1, "isolation": ex.isolation_in_use or ex.isolation},
    "docker": lambda ex: {"stop_container": True},  # gone with the judgement
}


def checker_executor(executor: ExecutorLike) -> ExecutorLike:
    """A new executor, not started, for the checkers of a judgement of
    ``executor``'s (the module docstring)."""
    options = {k: v for k, v in executor._init_options.items() if k not in _HELD}
    options.update(limits=executor.limits.replace(gpu_memory_mb=None), keep_code_files=False)
    if executor.environment is not None:  # the one it runs now (use_environment may have changed it)
        options.pop("image", None)
        options["environment"] = executor.environment
    own = _OWN.get(executor.name)
    if own is not None:
        options.update(own(executor))
    return type(executor)(**options)
