"""The checks of ``SandboxExecutor``'s own options, made when it is made:
each refusal names the option to change."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._errors import ConfigurationError
from ._pool import MAX_SIZE

__all__ = ["ISOLATION_TIERS", "check_options"]

ISOLATION_TIERS = ("auto", "namespaces", "landlock")


def check_options(
    *,
    pool: bool,
    preload: Sequence[str],
    isolation: str,
    stateful: bool,
    gpus: Any,
    sizes: dict[str, Any],
) -> None:
    """``ConfigurationError`` for options that cannot go together or are
    out of range (``sizes``: the options that take a positive whole number)."""
    if stateful and not pool:
        raise ConfigurationError(
            "SandboxExecutor(stateful=True) keeps its session in the warm pool: drop pool=False"
        )
    if stateful and isolation == "landlock":
        raise ConfigurationError(
            "SandboxExecutor(stateful=True) needs the namespaces tier: "
            "isolation='landlock' cannot keep a session (use isolation='namespaces')"
        )
    if isolation not in ISOLATION_TIERS:
        raise ConfigurationError(
            f"SandboxExecutor(isolation=...) must be one of "
            f"{', '.join(map(repr, ISOLATION_TIERS))}, got {isolation!r}"
        )
    if preload and isolation == "landlock":
        raise ConfigurationError(
            "preload=... needs the warm pool, which the Landlock tier has not: "
            "drop preload, or isolation='landlock'"
        )
    for label, value in sizes.items():
        if not isinstance(value, int) or value < 1:
            raise ConfigurationError(
                f"SandboxExecutor({label}=...) must be a positive whole number, got {value!r}"
            )
    pool_size = sizes["pool_size"]
    if pool_size > MAX_SIZE:
        raise ConfigurationError(
            f"SandboxExecutor(pool_size=...) is at most {MAX_SIZE} (units kept ready, "
            f"two waiting processes each; callers beyond them get units made on "
            f"demand), got {pool_size}"
        )
    if isinstance(preload, str) or not all(isinstance(m, str) and m for m in preload):
        raise ConfigurationError(f"preload must be a list of module names, got {preload!r}")
    if preload and not pool:
        raise ConfigurationError("preload=... needs the warm pool: drop pool=False")
    if preload and gpus is not None and not stateful:
        raise ConfigurationError(
            "preload=... warms the pool's units, and GPU blocks do not run in them (a unit's "
            "nested PID namespace makes CUDA fail): use stateful=True to keep modules imported "
            "between GPU blocks, or drop preload"
        )
