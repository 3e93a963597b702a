"""The local backend: each block a plain subprocess on this machine.

No isolation: the code runs as you, with your files and network. What it does
guarantee: a minimal environment (no API keys from the host unless asked), a
session of its own per block, no process left behind after the block (on
success, failure, timeout or cancellation), bounded output, and a code file
per block whose name never collides.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..._languages import Policy, runnable_languages
from ..._models import Limits
from ..._progress import OnProgress
from ..._workspace import Workspace
from ...environments import Environment
from .._executor_api import Capabilities
from .._host import HostExecutor, ProcessRunner, child_environment, with_options
from .._process import Cancellation, OutputCallback, ProcessOutcome, run_process

__all__ = ["LocalExecutor", "child_environment"]


class LocalExecutor(HostExecutor):
    """Run blocks as subprocesses of this process, unisolated.

    - ``environment``: the Python to use (``SystemPython()`` by default, or a
      ``Venv``).
    - ``env``: extra environment variables for every block.
    - ``inherit_env``: pass the host's whole environment (API keys included!)
      instead of a minimal one.
    - ``functions``: host-defined functions the code can import from the
      module ``functions_module`` (default and None: ``functions``); ``functions_prompt``
      describes them. AG2's
      and AutoGen's ``@with_requirements`` functions bring their imports and
      packages: installed where execbox owns the venv (``Venv()``: the
      executor's environment becomes that Venv with them added), else they
      must be there already (a system Python, a ``Venv(path=...)``).
    - ``silence_pip`` (True): ``pip install`` in a block gets ``-qqq``.
    - ``keep_code_files`` (True): False removes a block's code file once it
      has run (a block named by ``# filename:`` is the user's file: kept).
    - ``on_progress``: gets the steps of making the environment ready (a
      venv created, packages installed): a callable taking each step's
      text; default: a spinner on a terminal, ``execbox`` log lines
      otherwise; False shows nothing (``execbox._progress``).
    """

    name = "local"

    def __init__(
        self,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        environment: Environment | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = False,
        functions: Sequence[Callable[..., Any] | str] = (),
        functions_module: str | None = "functions",
        silence_pip: bool = True,
        keep_code_files: bool = True,
        on_progress: OnProgress = None,
    ) -> None:
        super().__init__(
            workspace=workspace,
            limits=limits,
            environment=environment,
            execution_policies=execution_policies,
            env=env,
            functions=functions,
            functions_module=functions_module,
            silence_pip=silence_pip,
            keep_code_files=keep_code_files,
            on_progress=on_progress,
        )
        self.inherit_env = inherit_env
        self._runner = Unjailed(self)

    @property
    def capabilities(self) -> Capabilities:
        path = self._child_env.get("PATH") or os.environ.get("PATH", "")
        return Capabilities(
            backend=self.name,
            isolated=False,
            stateful=False,
            enforced=frozenset({"timeout_s", "max_output_bytes", "memory_mb"}),
            languages=runnable_languages(path),
        )


class Unjailed(ProcessRunner):
    """The runner that jails nothing: the block's argv as a process of
    this one, in the workspace, with the block's environment."""

    def __init__(self, executor: LocalExecutor) -> None:
        self.executor = executor

    def run(
        self,
        argv: list[str],
        *,
        python_file: bool,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,  # never given: the local backend runs the file
        stdin: bytes | None = None,
        reserves: tuple[str, ...] | None = None,
    ) -> ProcessOutcome:
        executor = self.executor
        memory_mb = executor.limits.memory_mb
        data = reserves is not None and bool(memory_mb)  # Node.js, a JVM, Go: RLIMIT_AS stops them at start
        outcome = run_process(
            with_options(argv, reserves) if data and reserves else argv,
            cwd=str(executor.workspace.path),
            env=executor._child_env,
            timeout_s=executor.limits.timeout_s,
            output_limit=executor.limits.max_output_bytes,
            memory_mb=None if data else memory_mb,
            preexec=_data_limit(memory_mb) if data else None,
            cancel=cancel,
            on_output=on_output,
            stdin=stdin,
        )
        if data:
            outcome.address_space_mb, outcome.memory_rlimit = memory_mb, "RLIMIT_DATA"
        return outcome

    def build(
        self,
        argv: list[str],
        *,
        folders: tuple[str, ...],
        env: dict[str, str],
        timeout_s: float,
        cancel: Cancellation,
    ) -> ProcessOutcome:
        executor = self.executor
        return run_process(
            argv,
            cwd=str(executor.workspace.path),
            env={**executor._child_env, **env},
            timeout_s=timeout_s,
            output_limit=executor.limits.max_output_bytes,
            # RLIMIT_DATA, not AS, for a compiler: javac's JVM and tsc's Node.js reserve far more
            # address space than they use, which DATA does not count
            preexec=_data_limit(executor.limits.memory_mb),
            cancel=cancel,
        )


def _data_limit(memory_mb: int | None) -> Callable[[], None] | None:
    """What bounds a compiler's memory at ``Limits.memory_mb`` (between fork and exec)."""
    if not memory_mb:
        return None
    limit = memory_mb << 20

    def apply() -> None:
        hard = resource.getrlimit(resource.RLIMIT_DATA)[1]
        value = limit if hard == resource.RLIM_INFINITY else min(limit, hard)
        resource.setrlimit(resource.RLIMIT_DATA, (value, value))

    return apply
