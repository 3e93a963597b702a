"""The warning an executor gives when it starts with ``Limits`` its backend
cannot enforce (``UnenforcedLimitWarning``): which ones, and why or what to
use instead."""

from __future__ import annotations

import warnings

from .._errors import UnenforcedLimitWarning
from .._models import Limits
from ._executor_api import Capabilities

__all__ = ["warn_unenforced"]


def warn_unenforced(name: str, limits: Limits, capabilities: Capabilities, *, stacklevel: int) -> None:
    """Warn where ``limits`` asks for what ``capabilities`` does not enforce
    (``stacklevel``: as ``warnings.warn``'s, counted from the caller)."""
    enforced = capabilities.enforced
    asked = {
        field
        for field in ("memory_mb", "max_processes", "cpus", "gpu_memory_mb")
        if getattr(limits, field) is not None
    }
    if limits.network is False:
        asked.add("network")
    missing = sorted(asked - enforced)
    if not missing:
        return
    gaps = capabilities.gaps
    if all(field in gaps for field in missing):  # the backend says why, and the fix
        why = "; ".join(f"{field}: {gaps[field]}" for field in missing)
        warnings.warn(
            f"the {name} backend cannot enforce Limits {', '.join(missing)} on this host: "
            f"they are ignored ({why})",
            UnenforcedLimitWarning,
            stacklevel=stacklevel + 1,
        )
        return
    warnings.warn(
        f"the {name} backend cannot enforce Limits {', '.join(missing)}: they are ignored "
        "(use the sandbox or docker backend to enforce them)",
        UnenforcedLimitWarning,
        stacklevel=stacklevel + 1,
    )
