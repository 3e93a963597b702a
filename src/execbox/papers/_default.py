"""The catalog execbox uses when none is given: local catalog files first,
then the Remyx API."""

from __future__ import annotations

import builtins
import os
from collections.abc import Iterable

from .._errors import ConfigurationError
from ._catalog import Catalog, ChainedCatalog
from ._local import LocalCatalog
from ._remyx import RemyxCatalog

__all__ = ["default_catalog"]


def default_catalog(
    files: Iterable[str | os.PathLike[str]] = (),
    *,
    offline: bool = False,
    api_key: str | None = None,
    base_url: str | None = None,
) -> Catalog:
    """The catalog to use: a ``LocalCatalog`` per file, in order, then the
    Remyx API (``RemyxCatalog(api_key, base_url=base_url)``); with
    ``offline=True`` only the files. One catalog is returned as is, more as
    a ``ChainedCatalog``."""
    if isinstance(files, (str, os.PathLike)):
        files = [files]
    catalogs: builtins.list[Catalog] = [LocalCatalog(f) for f in files]
    if not offline:
        catalogs.append(RemyxCatalog(api_key, base_url=base_url))
    elif api_key is not None or base_url is not None:
        raise ConfigurationError(
            "default_catalog(offline=True) does not use the Remyx API: drop api_key/base_url or offline"
        )
    if not catalogs:
        raise ConfigurationError(
            "offline with no catalog file leaves nowhere to look: pass a file "
            "(--catalog FILE, default_catalog([path])) or drop offline (--offline)"
        )
    return catalogs[0] if len(catalogs) == 1 else ChainedCatalog(*catalogs)
