"""Which kernel a ``JupyterExecutor`` made without ``kernel=`` gets: a
jailed one where bubblewrap can make a jail here, else a local one, with a
warning that says so (``default_kernel``)."""

from __future__ import annotations

import functools
import warnings

from ..._errors import BackendUnavailableError
from ...jail import find_bwrap, probe

__all__ = ["default_kernel", "sandbox_unavailable"]


def default_kernel() -> str:
    """ "sandbox" where bubblewrap can make a jail here, else "local" (warned)."""
    reason = sandbox_unavailable()
    if reason is None:
        return "sandbox"
    warnings.warn(
        f"JupyterExecutor: {reason}; the kernel runs unisolated as this user "
        "(pass kernel='local' to say so, or install bubblewrap)",
        stacklevel=3,
    )
    return "local"


@functools.lru_cache(maxsize=1)
def sandbox_unavailable() -> str | None:
    bwrap = find_bwrap()
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        probe([bwrap, "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "--", "/bin/true"])
    except BackendUnavailableError as exc:
        return str(exc)
    return None
