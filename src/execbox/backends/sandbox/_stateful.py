"""``SandboxExecutor(stateful=True)``'s blocks: each one sent to the
executor's session (``_session``), one at a time, and its answer made an
outcome. A Python block goes as its text (not its file read back: see
``Executor._execute_code``); any other language as the argv of a program
the session forks and execs in the unit's namespaces.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ..._languages import PYTHON, Language, resolve_program
from ...jail import no_watch
from .._process import Cancellation, OutputCallback
from .._result import Outcome, missing_program
from ._pool import ZygotePool
from ._session import Session, session_outcome

__all__ = ["StatefulBlocks"]


class StatefulBlocks:
    """The session of one executor (``executor``: a ``SandboxExecutor``,
    read for its limits, workspace, lease and programs' PATH)."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self._lock = threading.Lock()
        self._session: Session | None = None

    def close(self) -> None:
        with self._lock:  # a running block (cancelled by now) ends first
            if self._session is not None:
                self._session.close()
                self._session = None

    def run(
        self,
        pool: ZygotePool,
        language: Language,
        code_path: str,
        code: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        *,
        stdin: str | None = None,
    ) -> Outcome:
        ex = self.executor
        path = os.path.join(str(ex.workspace.path), code_path)
        assert language.command is not None
        program = language.command[0]
        if language.python_script:
            request: dict[str, Any] = {"code": code, "file": path}
        else:  # a program, or the executor's Python given a command (pytest's)
            resolved = ex._python if program == PYTHON else resolve_program(program, ex._child_env["PATH"])
            if resolved is None:
                return missing_program(program, language.install_hint)
            request = {"argv": [resolved, *language.command[1:], path]}
        prefix = os.path.basename(code_path).rsplit(".", 1)[0]
        return self._send(pool, language, request, prefix, cancel, on_output, stdin)

    def run_argv(
        self,
        pool: ZygotePool,
        language: Language,
        argv: list[str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
        *,
        stdin: str | None = None,
    ) -> Outcome:
        """A built program (``_build``), by its argv."""
        ex = self.executor
        if not os.path.isabs(argv[0]):
            resolved = resolve_program(argv[0], ex._toolchain_path()[0])
            if resolved is None:
                return missing_program(argv[0], language.install_hint)
            argv = [resolved, *argv[1:]]
        return self._send(pool, language, {"argv": argv}, "program", cancel, on_output, stdin)

    def _send(
        self,
        pool: ZygotePool,
        language: Language,
        request: dict[str, Any],
        prefix: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome:
        ex = self.executor
        limits = ex.limits
        with self._lock:
            if self._session is None or self._session.pool is not pool:
                self._session = Session(pool, ex._lease, ex._gpu_watch or no_watch)
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
