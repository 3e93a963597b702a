"""``SandboxExecutor(stateful=True)``'s runner (``StatefulRunner``): each
block sent to the executor's session (``_session``), one at a time, and its
answer made an outcome (``_session_outcome``). A Python block goes as its text where the runner
it wraps (the pool's) takes it so (``runs_from_text``), else as its file;
any other block, and a built program, as an argv the session forks and
execs in the unit's namespaces. A process that is no block (the functions'
import probe) and a compiler run as the wrapped runner runs them.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..._languages import Language
from ..._models import Limits
from ...jail import no_watch
from .._process import Cancellation, OutputCallback, ProcessOutcome
from .._result import Outcome
from ._pool import ZygotePool
from ._runner import JailRunner
from ._session import Session
from ._session_outcome import session_outcome

__all__ = ["StatefulRunner"]


class StatefulRunner:
    """The session of one executor (``executor``: a ``SandboxExecutor``,
    read for its workspace, lease and memory limit) in a box of ``pool``;
    ``jail``: the pool's runner, which runs what is not a block."""

    def __init__(self, executor: Any, jail: JailRunner, pool: ZygotePool) -> None:
        self.executor = executor
        self.jail = jail
        self.pool = pool
        self._lock = threading.Lock()
        self._session: Session | None = None

    def close(self) -> None:
        with self._lock:  # a running block (cancelled by now) ends first
            if self._session is not None:
                self._session.close()
                self._session = None

    def runs_from_text(self, language: Language, code: str) -> bool:
        return self.jail.runs_from_text(language, code)

    def run(self, argv: list[str], **how: Any) -> ProcessOutcome:
        return self.jail.run(argv, **how)

    def build(self, argv: list[str], **how: Any) -> ProcessOutcome:
        return self.jail.build(argv, **how)

    def run_block(
        self,
        language: Language,
        argv: list[str],
        *,
        code_file: str | None,
        limits: Limits,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,
        stdin: str | None = None,
    ) -> Outcome:
        if code_file is None:  # a built program (``_build``)
            request: dict[str, Any] = {"argv": argv}
            prefix = "program"
        else:  # by its absolute path: a block may have changed the session's directory
            path = os.path.join(str(self.executor.workspace.path), code_file)
            if language.python_script:
                request = {"file": path} if source is None else {"code": source, "file": path}
            else:  # a program, or the executor's Python given a command (pytest's)
                request = {"argv": [*argv[:-1], path]}
            prefix = os.path.basename(code_file).rsplit(".", 1)[0]
        return self._send(language, request, prefix, limits, cancel, on_output, stdin)

    def _send(
        self,
        language: Language,
        request: dict[str, Any],
        prefix: str,
        limits: Limits,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome:
        ex = self.executor
        with self._lock:
            if self._session is None:
                self._session = Session(self.pool, ex._lease, ex._gpu_watch or no_watch)
            before = ""
            how = self._session.gone()
            if how is not None:
                self._session.close()
                before = (
                    f"The Python session had died since the last block ({how}): this block runs in a "
                    "fresh one; variables and imports of earlier blocks are lost."
                )
            answer = self._session.run(
                request,
                timeout_s=limits.timeout_s,
                output_limit=limits.max_output_bytes,
                memory_mb=ex.memory_mb,
                cancel=cancel,
                on_output=on_output,
                stdin=None if stdin is None else stdin.encode("utf-8", "surrogateescape"),
            )
        if "AS" in ex._rlimits():  # no memory cgroup: the address space stood in
            answer.process.address_space_mb = ex.memory_mb
        return session_outcome(language.name, answer, limits, ex.workspace, prefix, on_output, before=before)
