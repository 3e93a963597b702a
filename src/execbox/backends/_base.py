"""The executor interface every backend implements, with its lifecycle and
the block loop written once (``_block_run.py``).

A backend provides ``_start``, ``_stop`` and ``_execute`` (run one code file
that the base class has written; or ``_execute_code``, given its text too);
the base class owns language policies, filenames, the workspace change
report, aggregation, sync/async parity, cancellation and the
context-manager protocol.

A backend that runs a Python environment of its own keeps it in
``_environment`` (read as ``environment``) and checks one with
``_checked_environment``; one that can grow it says so in
``can_add_libraries`` and grows it in ``_with_libraries``. Callers (the
Python tool, ``functions=``) ask these, never the backend's class.

Code files of blocks without a filename get random names: with predictable
ones, a folder planted at the next name by one block made every later block
fail. ``keep_code_files=False`` removes each one once its block has run (the
peers' ``cleanup_temp_files``), or never writes it where the backend runs the
block from its text (``_runs_from_text``: the sandbox's pool and sessions, for
Python); a named block's file is the user's and stays.
"""

from __future__ import annotations

import asyncio
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, ClassVar, Self

from .._codec import VERSION, encode_options
from .._errors import ConfigurationError, ExecutorClosedError
from .._errors import UnenforcedLimitWarning as UnenforcedLimitWarning
from .._foreign import EXECUTOR_HINTS, refuse_foreign
from .._judge import Case, JudgeResult
from .._languages import PYTHON, Language, Policy, resolve_policies, resolve_program
from .._models import CodeBlock, ExecutionResult, Limits
from .._progress import OnProgress, Progress, check_on_progress, reporting
from .._run_events import EventSink, RunEvent
from .._workspace import Workspace
from ..environments._base import Environment
from ._block_run import run_blocks
from ._blocks import as_blocks
from ._build import toolchain_version
from ._executor_api import Capabilities
from ._executor_files import ExecutorFiles
from ._judging import ajudge, judge
from ._process import Cancellation, OutputCallback, ProcessOutcome
from ._result import Outcome
from ._streaming import arun_blocks, astream_events, stream_events
from ._unenforced import warn_unenforced

__all__ = ["Executor", "UnenforcedLimitWarning"]


class Executor(ABC):
    """Runs code blocks. Use as a (async) context manager, or call ``close()``."""

    name: ClassVar[str] = "base"
    # whether blocks may have stdin (``_execute_code``'s and ``_run_program``'s), and whether this
    # backend builds compiled languages (``_compile``, ``_run_program``)
    takes_stdin: ClassVar[bool] = False
    compiles: ClassVar[bool] = False
    # The languages this backend runs at all, whatever is installed, and how it runs them
    # (None: each language whose programs it finds): what a block of another one is told
    language_scope: ClassVar[tuple[frozenset[str], str] | None] = None
    _environment: Environment | None = None
    _init_options: dict[str, Any]  # set by __new__

    def __new__(cls, *args: Any, **options: Any) -> Self:
        refuse_foreign(cls, options, EXECUTOR_HINTS)  # AG2's timeout=, work_dir=...: name ours
        # The options it was made with, so that to_config() can save them.
        self = super().__new__(cls)
        self._init_options = dict(options)
        return self

    def __init__(
        self,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        silence_pip: bool = True,
        keep_code_files: bool = True,
    ) -> None:
        self._owns_workspace = not isinstance(workspace, Workspace)
        self.workspace = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
        self.limits = limits if limits is not None else Limits()
        self.policies: dict[str, Policy] = resolve_policies(execution_policies)
        self.silence_pip = silence_pip
        self.keep_code_files = keep_code_files
        self._state_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._active: set[Cancellation] = set()
        # Whether blocks can write under .execbox/ (then each run walks it for set-ID bits);
        # a backend that mounts it read-only for its blocks says False, or names the folders they write.
        self._blocks_write_internal: bool | Sequence[str] = True

    def __repr__(self) -> str:
        return f"{type(self).__name__}(workspace={str(self.workspace.path)!r}, limits={self.limits!r})"

    # -- what a backend provides --------------------------------------------

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities: ...

    def _start(self) -> None:  # noqa: B027 (a hook: a backend with nothing to acquire leaves it)
        """Acquire what runs need (environments, containers...)."""

    def _stop(self) -> None:  # noqa: B027 (a hook, like _start)
        """Release what ``_start`` acquired."""

    @abstractmethod
    def _execute(
        self, language: Language, code_path: str, cancel: Cancellation, on_output: OutputCallback | None
    ) -> Outcome:
        """Run the code file at ``code_path`` (relative to the workspace, which
        is the working directory of the code)."""

    def _execute_code(
        self,
        language: Language,
        code_path: str,
        code: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None = None,
        *,
        from_text: bool = False,
    ) -> Outcome:
        """Run a block the base class has just written to ``code_path`` (or
        not, where ``_runs_from_text``), its text ``code`` (``stdin``: only
        where ``takes_stdin``; ``from_text``: what ``_runs_from_text`` said
        of this block, asked once, by the block loop). A backend that
        sends the text rather than runs the file (a Jupyter kernel)
        overrides this and uses ``code``: reading the file
        back would read what a process left by an earlier block may have put
        there meanwhile (a link to a host file, a FIFO)."""
        return self._execute(language, code_path, cancel, on_output)

    def _compile(
        self, argv: list[str], *, folders: tuple[str, ...], env: dict[str, str], cancel: Cancellation
    ) -> ProcessOutcome:
        """Run a compiler (``compiles``): as blocks run, under
        ``limits.compile_timeout_s``, the workspace-relative ``folders``
        writable, ``env`` added to the blocks' environment."""
        raise NotImplementedError(f"the {self.name} backend does not build compiled languages")

    def _run_program(
        self,
        language: Language,
        argv: list[str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome:
        """Run a built program's ``argv`` as a block (``compiles``)."""
        raise NotImplementedError(f"the {self.name} backend does not build compiled languages")

    def _toolchain_path(self) -> tuple[str, str]:
        """The PATH blocks see and the executor's Python, for ``_build.toolchain_version``."""
        return os.environ.get("PATH", os.defpath), ""

    def _has_program(self, name: str) -> bool:
        """Whether blocks find ``name`` here (which build a language has: ``Language.installed``)."""
        return name == PYTHON or resolve_program(name, self._toolchain_path()[0]) is not None

    def _toolchain_version(self, language: Language) -> str:
        """What the compile cache's key takes of the toolchain: its version
        as the host's toolchain prints it (a container's: its image)."""
        path, python = self._toolchain_path()
        return toolchain_version(language, path, python)

    def _build_root(self) -> str:
        """The workspace's path where the compiler runs (a container's: its own)."""
        return str(self.workspace.path)

    def _give_build(self, folders: tuple[str, ...]) -> None:  # noqa: B027 (a hook, like _start)
        """Let the compiler write ``folders`` (a jail's identity: handed to it)."""

    def _checked_environment(self, environment: Environment) -> Environment:
        """``environment`` if this backend can run it, else ``ConfigurationError``."""
        raise ConfigurationError(f"the {self.name} backend takes no environment")

    def _with_libraries(self, packages: tuple[str, ...], progress: Progress) -> Environment:
        """``with_libraries`` where ``can_add_libraries()`` says None."""
        raise NotImplementedError(f"the {self.name} backend says it can add libraries but does not")

    def to_config(self) -> dict[str, Any]:
        """This executor's backend and options as JSON-ready data;
        ``execbox.executor_from_config`` makes a new executor from it."""
        return {"version": VERSION, "backend": self.name, "options": encode_options(self._init_options)}

    # -- environment ----------------------------------------------------------

    @property
    def environment(self) -> Environment | None:
        """The Python environment blocks run in (None: the backend has none of its own)."""
        return self._environment

    def can_add_libraries(self) -> str | None:
        """None when ``with_libraries`` can add packages to this executor's
        environment; else why not, and what to do instead (a sentence)."""
        return f"the {self.name} backend has no environment execbox installs into."

    def with_libraries(self, packages: Sequence[str], *, on_progress: OnProgress = None) -> Environment:
        """This executor's environment with ``packages`` added, made ready
        (installed into a new cached venv, or a derived image built); what
        runs now is untouched: ``use_environment`` switches to it.
        ``on_progress`` gets the steps (default: a spinner on a terminal,
        log lines otherwise; False: nothing).

        Raises ``ConfigurationError`` with ``can_add_libraries()``'s reason
        where execbox does not install, ``EnvironmentSetupError`` when
        installing fails."""
        reason = self.can_add_libraries()
        if reason is not None:
            raise ConfigurationError(
                f"cannot add {', '.join(packages)} to this {self.name} executor: {reason}"
            )
        check_on_progress(on_progress, "with_libraries")
        with reporting(on_progress) as progress:
            return self._with_libraries(tuple(packages), progress)

    def use_environment(self, environment: Environment) -> None:
        """Run the next blocks in ``environment`` (one from ``with_libraries``).
        The executor restarts: what runs now is stopped, so let it finish first."""
        self._environment = self._checked_environment(environment)
        self.restart()

    # -- lifecycle ------------------------------------------------------------

    def start(self) -> None:
        """Get ready to run (idempotent; ``run`` calls it)."""
        with self._state_lock:
            if self._closed:
                raise ExecutorClosedError(self.name)
            if self._started:
                return
            self._warn_unenforced()
            self._start()
            self._started = True

    @property
    def files(self) -> ExecutorFiles:
        """The workspace's files as the blocks own them: ``read``, ``write``
        (handed to the blocks' identity), ``write_many``, ``list``, ``delete``."""
        return ExecutorFiles(self)

    def give_to_blocks(self, paths: Iterable[str]) -> None:
        """Let blocks write the given workspace paths (files the host wrote
        after start: uploads). Where blocks run as another identity (the
        sandbox's jail id, a container's user) the paths and the folders
        leading to them are handed to it, never following a link; elsewhere
        nothing needs doing."""
        return None

    def restart(self) -> None:
        """Stop whatever is running now; the executor stays usable."""
        self._cancel_active()
        with self._state_lock:
            if self._started:
                self._stop()
                self._started = False

    def close(self) -> None:
        """Stop what runs, release resources, remove a temporary workspace."""
        self._cancel_active()
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            if self._started:
                self._stop()
        if self._owns_workspace:
            self.workspace.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- running --------------------------------------------------------------

    def run(
        self,
        blocks: CodeBlock | Sequence[CodeBlock],
        *,
        on_output: Callable[[str, str], None] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> ExecutionResult:
        """Run blocks in order, stopping at the first failure.

        ``on_output(stream, text)`` receives output as it is printed;
        ``on_event(event)`` every event of the run (``execbox.StartEvent``
        ... ``EndEvent``), in the thread that runs the blocks."""
        todo = as_blocks(blocks)
        cancel = Cancellation()
        try:
            return self._run_blocks(todo, cancel, EventSink(on_event, on_output))
        finally:
            cancel.close()

    async def arun(
        self,
        blocks: CodeBlock | Sequence[CodeBlock],
        *,
        on_output: Callable[[str, str], None] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> ExecutionResult:
        """``run`` for asyncio. Cancelling the task kills what the block started."""
        return await arun_blocks(self, as_blocks(blocks), EventSink(on_event, on_output))

    def stream(self, blocks: CodeBlock | Sequence[CodeBlock]) -> Generator[RunEvent, None, None]:
        """Run blocks and yield the run's events as they happen, the last an
        ``EndEvent`` with the result. Closing the iterator early kills the run."""
        return stream_events(self, as_blocks(blocks))

    def astream(self, blocks: CodeBlock | Sequence[CodeBlock]) -> AsyncIterator[RunEvent]:
        """``stream`` for asyncio (``async for event in executor.astream(...)``)."""
        return astream_events(self, as_blocks(blocks))

    def judge(
        self,
        code: str,
        language: str,
        cases: Sequence[Case | Mapping[str, Any]],
        *,
        compare: str = "lines",
        tolerance: float = 1e-6,
        stop_on_failure: bool = True,
        fresh_workspace: bool = True,
    ) -> JudgeResult:
        """Run ``code`` against test cases (``execbox.Case`` or dicts
        ``{stdin, expected_stdout | checker}``) under this executor's limits,
        building a compiled language once, before the first case: a verdict
        per case and overall. ``compare``: "lines" (trailing spaces
        ignored), "exact", "whitespace" or "float" (within ``tolerance``);
        ``stop_on_failure`` skips the cases after the first that fails
        (``execbox._judge`` says more).

        The program is the checker's adversary, so: each case runs in the
        workspace as it was before the first (what a case leaves is
        removed, what it changed put back) unless ``fresh_workspace=False``
        (the cases then share it); checkers run in an executor of their own
        (a workspace and jail the program never sees), built before the
        first case; a stateful executor is refused (``ConfigurationError``):
        its blocks share one interpreter."""
        return judge(
            self,
            code,
            language,
            cases,
            compare=compare,
            tolerance=tolerance,
            stop_on_failure=stop_on_failure,
            fresh_workspace=fresh_workspace,
        )

    async def ajudge(
        self,
        code: str,
        language: str,
        cases: Sequence[Case | Mapping[str, Any]],
        *,
        compare: str = "lines",
        tolerance: float = 1e-6,
        stop_on_failure: bool = True,
        fresh_workspace: bool = True,
    ) -> JudgeResult:
        """``judge`` for asyncio: cancelling the task kills the case that runs."""
        return await ajudge(
            self,
            code,
            language,
            cases,
            compare=compare,
            tolerance=tolerance,
            stop_on_failure=stop_on_failure,
            fresh_workspace=fresh_workspace,
        )

    def _run_blocks(self, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink) -> ExecutionResult:
        return run_blocks(self, blocks, cancel, sink)

    def _write_internal(self, relative: str, code: str) -> None:
        self.workspace.write_internal(relative, code.encode("utf-8"))

    def _runs_from_text(self, language: Language, code: str) -> bool:
        """Whether ``_execute_code`` runs this block from ``code`` alone,
        never reading its file: with ``keep_code_files=False`` the file is
        then not written at all (a write and a removal per block saved; the
        block's ``__file__`` still names it, its tracebacks show its lines).
        The block loop asks once per block and tells ``_execute_code``."""
        return False

    def _cancel_active(self) -> None:
        with self._state_lock:
            active = list(self._active)
        for cancel in active:
            cancel.cancel()

    def _warn_unenforced(self) -> None:
        # stacklevel: the code that entered the executor (here <- start <- __enter__ <- it)
        warn_unenforced(self.name, self.limits, self.capabilities, stacklevel=4)
