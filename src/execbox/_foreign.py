"""Keyword arguments AG2 and AutoGen users bring, answered with execbox's
spelling.

``LocalExecutor(timeout=30)`` would fail with Python's bare "unexpected
keyword argument 'timeout'", which leaves the user to search for what
execbox calls it. The names below get a ``TypeError`` that says it. They are
checked in one place, where the object is made (``Executor.__new__``,
``Environment.__new__``), against the names the class's constructors really
take: a backend that does have an option of that name is never refused, and
the constructors keep their plain, closed signatures (a type checker still
flags a typo).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any

__all__ = ["ENVIRONMENT_HINTS", "EXECUTOR_HINTS", "refuse_foreign"]

_VENV = (
    "use environment=Venv(path=...), or Venv(packages=[...]) for one execbox creates and caches "
    "(DockerPython(...) on the docker backend)"
)
_CODE_FILES = (
    "use keep_code_files=False to delete a block's code file after it runs "
    "(the default, keep_code_files=True, keeps them)"
)

# Options of AG2's and AutoGen's code executors (LocalCommandLineCodeExecutor,
# DockerCommandLineCodeExecutor, JupyterCodeExecutor) → execbox's spelling.
EXECUTOR_HINTS: Mapping[str, str] = {
    "timeout": "use limits=Limits(timeout_s=...)",
    "work_dir": "use workspace=... (a folder path or a Workspace)",
    "virtual_env_context": _VENV,
    "venv_context": _VENV,
    "venv_path": _VENV,
    "venv_dir": _VENV,
    "cleanup_temp_files": _CODE_FILES,
    "delete_tmp_files": _CODE_FILES,
    "bind_dir": "the workspace is the folder the container sees: use workspace=...",
    "extra_volumes": "use volumes=... (DockerExecutor)",
    # execbox's own option, the local backend's only: the others build a block's environment from nothing
    "inherit_env": ("only LocalExecutor passes the host's environment; pass what blocks need with env={...}"),
    # execbox's own former spelling
    "progress": "use on_progress=... (a callable taking each step's text; False shows nothing)",
    "jupyter_server": (
        "use kernel=JupyterConnectionInfo(...) or kernel=LocalJupyterServer() (JupyterExecutor)"
    ),
}

# Options of AG2's create_virtual_env / venv helpers → Venv's spelling.
ENVIRONMENT_HINTS: Mapping[str, str] = {
    "python_version": 'use python="3.11" (Venv(python=...) finds that version on this machine)',
    "venv_path": "use path=... (Venv(path=...))",
    "dir_path": "use path=... (Venv(path=...))",
    "env_dir": "use path=... (Venv(path=...))",
}


def refuse_foreign(cls: type, options: Mapping[str, Any], hints: Mapping[str, str]) -> None:
    """Raise ``TypeError`` naming execbox's spelling when ``options`` has a
    name of ``hints`` that ``cls``'s constructors do not take."""
    foreign = [name for name in options if name in hints]
    if not foreign:
        return
    accepted = _accepted(cls)
    for name in foreign:
        if accepted is None or name in accepted:
            continue
        raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}: {hints[name]}")


@functools.cache
def _accepted(cls: type) -> frozenset[str] | None:
    """The keyword names ``cls(...)`` takes, following ``**options`` handed
    up the class chain (None: it takes any)."""
    names: set[str] = set()
    handed_up = False
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None or klass is object:
            continue
        params = inspect.signature(init).parameters.values()
        names.update(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        handed_up = any(p.kind is p.VAR_KEYWORD for p in params)
        if not handed_up:
            return frozenset(names)
    return None if handed_up else frozenset(names)
