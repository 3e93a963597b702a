"""Where execbox keeps what it builds once and reuses (venvs, image root
filesystems, build locks): ``EXECBOX_CACHE_DIR``, else the XDG cache."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """Where execbox caches venvs (``EXECBOX_CACHE_DIR`` or the XDG cache)."""
    base = os.environ.get("EXECBOX_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "execbox"
    )
    return Path(base)
