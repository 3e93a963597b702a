"""One error tree for execbox.

Failures of the *user's code* are never exceptions: they come back as data in
``ExecutionResult.error``. Exceptions are for the infrastructure and for bad
calls::

    ExecboxError
     ├── ConfigurationError        a bad option or argument (also a ValueError)
     │    └── NoCodeBlocksError    run() was given no code blocks
     ├── WorkspaceError            the workspace cannot do what was asked
     │    └── PathEscapeError      a path leads outside the workspace
     ├── EnvironmentSetupError     a Python environment could not be made
     ├── BackendUnavailableError   a backend's component is missing or down
     │    └── ImageMissingError    a Docker image is not in the engine and cannot be pulled
     ├── ModelError                the model server failed or refused a request
     ├── CatalogError              a paper catalog failed (unreachable, refused, bad answer)
     │    └── PaperNotFoundError   the catalog has no paper with that arXiv id
     ├── ServiceError              `execbox serve` refused or failed a request, or was not reached
     │    ├── SessionGoneError     410: the session ended (``reason``: ttl, idle, deleted)
     │    ├── ExecutionGoneError   410: the session is open, one of its executions is no longer kept
     │    └── ServiceBusyError     429: the server is full (``retry_after`` seconds)
     ├── NodeLostError             a Ray node died under a run, or holds a pinned executor no more (retryable)
     ├── ClusterBusyError          the Ray cluster runs as much as it may (``retry_after`` seconds, retryable)
     ├── StallError                a part of a backend stopped answering past its deadline
     │                             (also a TimeoutError)
     └── ExecutorClosedError       the executor was used after close()

Every message names what to change. The Docker SDK's exceptions never reach
the caller: ``_docker_engine.engine_errors`` translates them.

Warnings, not errors (each a ``UserWarning``): ``WeakerIsolationWarning`` when
the sandbox runs blocks in its weaker tier (Landlock, no namespaces);
``UnenforcedLimitWarning`` when a limit is set that a backend cannot enforce.

``install_hint(extra)`` is the one place that says how to install one of
execbox's extras (``server``, ``jupyter``...): execbox is not on the
package index, so it names a command that works here: pip of the Python
running execbox, on its checkout (an editable install) or on a wheel.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from ._version import __version__

__all__ = [
    "BackendUnavailableError",
    "CatalogError",
    "ClusterBusyError",
    "ConfigurationError",
    "EnvironmentSetupError",
    "ExecboxError",
    "ExecutionGoneError",
    "ExecutorClosedError",
    "ImageMissingError",
    "ModelError",
    "NoCodeBlocksError",
    "NodeLostError",
    "PaperNotFoundError",
    "PathEscapeError",
    "ServiceBusyError",
    "ServiceError",
    "SessionGoneError",
    "StallError",
    "UnenforcedLimitWarning",
    "WeakerIsolationWarning",
    "WorkspaceError",
    "install_hint",
]


class ExecboxError(Exception):
    """Base of every error execbox raises."""


class ConfigurationError(ExecboxError, ValueError):
    """An option or argument has a value execbox cannot use."""


class NoCodeBlocksError(ConfigurationError):
    """``run()`` was called with an empty list of code blocks."""


class WorkspaceError(ExecboxError):
    """The workspace cannot do what was asked of it."""


class PathEscapeError(WorkspaceError):
    """A path given for the workspace leads outside it."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"path {path!r} {reason}: use a relative path inside the workspace")


class EnvironmentSetupError(ExecboxError):
    """A Python environment (interpreter, venv, packages) could not be set up."""


class BackendUnavailableError(ExecboxError):
    """A backend's component (bubblewrap, Docker, a kernel, ...) is missing."""

    def __init__(self, backend: str, message: str) -> None:
        self.backend = backend
        super().__init__(f"{backend} backend unavailable: {message}")


class ImageMissingError(BackendUnavailableError):
    """A Docker image is not in the engine's store and could not be pulled
    (raised where an image is made ready: DockerExecutor, DockerPython,
    DockerJupyterServer, image builds FROM it)."""

    def __init__(self, image: str, detail: str) -> None:
        self.image = image
        super().__init__(
            "docker",
            f"image {image!r} is not available locally and could not be pulled ({detail}): build it "
            "with `execbox images build` (the base image, or --package/--requirements/--dockerfile for "
            "one with your packages) and pass the tag it prints",
        )


class ExecutorClosedError(ExecboxError):
    """The executor was used after ``close()``."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        super().__init__(
            f"this {backend} executor is closed: create a new one (or use it "
            "as a context manager so it lives as long as you need it)"
        )


class ModelError(ExecboxError):
    """The model server could not be reached, refused the request, or
    answered with something execbox cannot use."""


class CatalogError(ExecboxError):
    """A paper catalog could not answer: the server is unreachable, refused
    the key, failed, or answered with something execbox cannot use; or a
    catalog file is missing or malformed."""


class PaperNotFoundError(CatalogError):
    """The catalog has no paper with this arXiv id."""

    def __init__(self, arxiv_id: str, where: str) -> None:
        self.arxiv_id = arxiv_id
        self.where = where
        super().__init__(
            f"no paper {arxiv_id!r} in {where}: check the arXiv id, or find it "
            "with `execbox papers search WORDS` (Catalog.search(query))"
        )


class ServiceError(ExecboxError):
    """``execbox serve`` answered with an error, or could not be reached
    (``execbox.Client``).

    ``status`` is the HTTP status (None when no answer came: ``code`` is
    then ``unreachable``, ``timeout`` or ``connection_lost``); ``code``,
    ``message`` and ``retryable`` are the server's (its message names what
    to change); ``retry_after`` the seconds it asked to wait, if it did.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "",
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after
        where = f"HTTP {status} {code}" if status is not None else code
        super().__init__(f"{message} ({where})" if where else message)


class SessionGoneError(ServiceError):
    """410: the session has ended; ``reason`` says why (``ttl``: its
    ``ttl_s`` passed; ``idle``: unused longer than its ``idle_ttl_s``;
    ``deleted``). Open a new one."""

    def __init__(
        self,
        message: str,
        *,
        reason: str | None,
        status: int | None = 410,
        code: str = "session_expired",
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.reason = reason
        super().__init__(message, status=status, code=code, retryable=retryable, retry_after=retry_after)


class ExecutionGoneError(ServiceError):
    """410 ``execution_gone``: the session is still open, but the execution
    asked for is no longer kept (the server keeps a session's last ones, and
    what they hold within a budget, the oldest dropped first); ``reason``
    names the bound (``kept_count``, ``session_kept_bytes``: ``execbox serve
    --session-kept-mb``, ``kept_bytes``: ``--kept-mb``), the message the
    option to raise. The session goes on: run again, or read a later one."""

    def __init__(
        self,
        message: str,
        *,
        reason: str | None,
        status: int | None = 410,
        code: str = "execution_gone",
        retryable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        self.reason = reason
        super().__init__(message, status=status, code=code, retryable=retryable, retry_after=retry_after)


class ServiceBusyError(ServiceError):
    """429: the server runs or keeps as much as it may (``--max-concurrency``,
    ``--max-sessions``); retry after ``retry_after`` seconds."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None,
        status: int | None = 429,
        code: str = "busy",
        retryable: bool = True,
    ) -> None:
        super().__init__(message, status=status, code=code, retryable=retryable, retry_after=retry_after)


class NodeLostError(ExecboxError):
    """A Ray node was lost: the run on it failed (its output is gone), or
    the executor pinned to it (a stateful kernel, a session's workspace)
    is gone with it. Retryable: a stateless run goes to the nodes left; a
    pinned executor starts afresh on one after ``restart()``."""

    retryable = True

    def __init__(self, node: str, message: str) -> None:
        self.node = node
        super().__init__(message)


class ClusterBusyError(ExecboxError):
    """Every node of the Ray cluster runs as many blocks as it may
    (``per_node``, ``max_runs`` of the ray backend): retry after
    ``retry_after`` seconds. Retryable."""

    retryable = True

    def __init__(self, message: str, *, retry_after: float) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class StallError(ExecboxError, TimeoutError):
    """A part of a backend that a block waits on (the sandbox pool's
    zygote, a jail's socket) did not answer within its deadline, so the
    caller is told instead of left waiting forever. ``waiting_for`` names
    what did not come. The part was stopped and is started afresh by the
    next block: retryable."""

    retryable = True

    def __init__(self, message: str, *, waiting_for: str) -> None:
        self.waiting_for = waiting_for
        super().__init__(message)


class UnenforcedLimitWarning(UserWarning):
    """A limit was set that this backend cannot enforce."""


class WeakerIsolationWarning(UserWarning):
    """The sandbox isolates blocks with its weaker tier here (Landlock,
    seccomp and rlimits, no namespaces): the message says why."""


def _checkout() -> Path | None:
    """The checkout execbox runs from (an editable install: ``src/execbox``
    beside ``pyproject.toml``), if it does."""
    root = Path(__file__).resolve().parents[2]
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "execbox").is_dir() else None


def install_hint(extra: str) -> str:
    """How to install execbox's ``extra`` for the Python running execbox: a
    command that works as printed (execbox is not on the package index, and
    ``pip`` may not be on PATH: ``python -m pip`` of this interpreter is)."""
    pip = f"{shlex.quote(sys.executable)} -m pip install"
    root = _checkout()
    if root is not None:
        return f"{pip} -e {shlex.quote(f'{root}[{extra}]')} (execbox's {extra} extra, from its checkout)"
    wheel = f"execbox-{__version__}-py3-none-any.whl"
    return (
        f"{pip} {shlex.quote(f'{wheel}[{extra}]')} (execbox's {extra} extra: the wheel execbox was "
        f"installed from; `python -m build` in a checkout makes it in dist/), or, in a checkout, "
        f"{pip} -e {shlex.quote(f'.[{extra}]')}"
    )
