"""Executors whose blocks are processes of a Python on this machine (the
local and sandbox backends): their options, the environment and the
functions module they give a block, and how a block's file becomes an argv.
How that argv runs is the backend's ``BlockRunner``: the local backend's
runs it as it is (``local``), the sandbox's in a jail (``sandbox._runner``)
or in its stateful session (``sandbox._stateful``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from .._errors import ConfigurationError
from .._languages import PYTHON, Language, Policy, resolve_program
from .._models import Limits
from .._progress import OnProgress, check_on_progress, reporting
from .._workspace import INTERNAL_DIR, Workspace
from ..environments import Environment, Progress, SystemPython, Venv
from ..environments._packages import require_packages, with_packages
from ._base import Executor
from ._functions import FunctionSet
from ._host_python import HostPython
from ._process import Cancellation, OutputCallback, ProcessOutcome
from ._result import Outcome, missing_program, outcome_to_result

__all__ = ["BlockRunner", "HostExecutor", "ProcessRunner", "child_environment", "reserving", "with_options"]

# Host variables a block always gets (when set on the host).
PASSED_THROUGH = ("HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER", "LOGNAME")


class BlockRunner(Protocol):
    """Runs a backend's blocks (the executor picks one at start, as httpx
    picks a transport): a block's argv to its ``Outcome`` (``run_block``),
    a process to completion (``run``: the functions' import probe, each
    block of a runner whose blocks are processes: ``ProcessRunner``), a
    compiler (``build``); ``runs_from_text``: whether a block's text is
    sent and its file never read (``Executor._runs_from_text``)."""

    def runs_from_text(self, language: Language, code: str) -> bool: ...

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
        """Run a block: ``argv`` ends with its ``code_file`` (relative to
        the workspace), or is a built program's (``code_file`` None);
        ``source``: the file's text, where ``runs_from_text`` said so."""
        ...

    def run(
        self,
        argv: list[str],
        *,
        python_file: bool,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,
        stdin: bytes | None = None,
        reserves: tuple[str, ...] | None = None,
    ) -> ProcessOutcome:
        """Run ``argv`` to completion (``python_file``: the executor's
        Python on a code file; ``source``: that file's text, to run it from;
        ``reserves``: not None for a runtime that reserves far more address
        space than it uses (``Language.reserves_address_space``): where an
        rlimit stands in for a memory cgroup, the runner holds the memory
        limit with RLIMIT_DATA, not RLIMIT_AS, and puts these options after
        argv[0])."""
        ...

    def build(
        self,
        argv: list[str],
        *,
        folders: tuple[str, ...],
        env: dict[str, str],
        timeout_s: float,
        cancel: Cancellation,
    ) -> ProcessOutcome:
        """Run a compiler as a block runs (``Executor._compile``)."""
        ...


class ProcessRunner:
    """The part of a runner whose blocks are processes: each block its
    ``run``, its ``ProcessOutcome`` made an ``Outcome``; no block runs
    from its text unless the runner says otherwise."""

    def runs_from_text(self, language: Language, code: str) -> bool:
        return False

    def run_block(
        self: BlockRunner,
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
        python_file = code_file is not None and language.python_script
        outcome = self.run(
            argv,
            python_file=python_file,
            cancel=cancel,
            on_output=on_output,
            source=source if python_file else None,
            stdin=None if stdin is None else stdin.encode("utf-8", "surrogateescape"),
            reserves=reserving(language, limits),
        )
        return outcome_to_result(language.name, outcome, limits)


class HostExecutor(HostPython, Executor):
    """The options every host-process backend takes (``LocalExecutor``
    documents them); ``_runner`` runs the blocks, set by the backend."""

    _environment: Environment  # always one (HostPython's), never Executor's None
    _runner: BlockRunner
    takes_stdin = True
    compiles = True

    def __init__(
        self,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        environment: Environment | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        env: Mapping[str, str] | None = None,
        functions: Sequence[Callable[..., Any] | str] = (),
        functions_module: str | None = "functions",
        silence_pip: bool = True,
        keep_code_files: bool = True,
        on_progress: OnProgress = None,
    ) -> None:
        super().__init__(
            workspace=workspace,
            limits=limits,
            execution_policies=execution_policies,
            silence_pip=silence_pip,
            keep_code_files=keep_code_files,
        )
        for key, value in (env or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError(f"env must map str to str; got {key!r}: {value!r}")
        self.env = dict(env or {})
        self.inherit_env = False  # the local backend may pass the host's whole environment
        self.functions = FunctionSet(functions, functions_module)
        self._environment = self._checked_environment(environment or SystemPython())
        if self.functions.packages and self.can_add_libraries() is None:  # execbox's own venv: add them
            self._environment = self._grown(self.functions.packages)  # (installed at start)
        self._progress = check_on_progress(on_progress, type(self).__name__)
        self._python: str | None = None
        self._child_env: dict[str, str] = {}
        self._imports_checked = False

    def can_add_libraries(self) -> str | None:
        """None for a ``Venv()`` of execbox's cache (it grows into a new
        cached venv); a system Python and a ``Venv(path=...)`` are the user's."""
        env = self._environment
        if isinstance(env, Venv) and env.cached:
            return None
        if isinstance(env, Venv):
            return (
                f"the executor's Venv lives at a path of its own ({env.path}), which execbox does not "
                "install into: use Venv(packages=[...]) without path= (execbox's cache), or preinstall "
                "them there."
            )
        if isinstance(env, SystemPython):
            return "the executor runs a shared system Python, which execbox never installs into."
        return (
            f"the executor's environment ({env!r}) is not a Venv of execbox's cache, "
            "the only one it installs into."
        )

    def _grown(self, packages: Sequence[str]) -> Environment:
        """The environment (a cached Venv) with ``packages`` added, not yet made."""
        assert isinstance(self._environment, Venv)
        return with_packages(self._environment, packages)

    def _with_libraries(self, packages: tuple[str, ...], progress: Progress) -> Environment:
        grown = self._grown(packages)
        grown.prepare(progress)
        return grown

    @property
    def functions_prompt(self) -> str:
        """Text that tells a model which host functions it can import."""
        return self.functions.prompt()

    def start(self) -> None:
        """Get ready to run, then (once) check that the functions' global
        imports load where the blocks run: ``ConfigurationError`` naming the
        one that failed, at start and at every run, rather than a
        ``ModuleNotFoundError`` in every block that imports the functions."""
        super().start()
        if not self._imports_checked:
            self._check_function_imports()

    def _check_function_imports(self) -> None:
        probe = self.functions.import_probe()
        if probe is not None:
            assert self._python is not None
            cancel = Cancellation()
            try:
                outcome = self._runner.run(
                    [self._python, "-c", probe], python_file=False, cancel=cancel, on_output=None
                )
            finally:
                cancel.close()
            where = f"the {self.name} backend's {self._python}"
            error = self.functions.import_error(outcome.capture.combined.text(), where)
            if error is not None:
                raise error
        self._imports_checked = True

    def _start(self) -> None:
        with reporting(self._progress) as progress:
            self._python = self.environment.prepare(progress)
        if self.can_add_libraries() is not None:  # the user's Python: they must be there already
            require_packages(
                self.environment,
                self._python,
                self.functions.packages,
                "functions=[...] (@with_requirements)",
            )
        extra: dict[str, str] = dict(self.environment.variables(self._python))
        if self.functions:
            saved = self.workspace.write_internal(
                f"{INTERNAL_DIR}/lib/{self.functions.module}.py", self.functions.source().encode("utf-8")
            )
            extra["PYTHONPATH"] = str(saved.parent)
        self._child_env = child_environment(
            bin_dir=self.environment.bin_dir(self._python),
            extra=extra,
            user=self.env,
            inherit=self.inherit_env,
        )

    def _runs_from_text(self, language: Language, code: str) -> bool:
        return self._runner.runs_from_text(language, code)

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
        source = code if from_text else None
        return self._execute(language, code_path, cancel, on_output, source=source, stdin=stdin)

    def _compile(
        self, argv: list[str], *, folders: tuple[str, ...], env: dict[str, str], cancel: Cancellation
    ) -> ProcessOutcome:
        return self._runner.build(
            argv, folders=folders, env=env, timeout_s=self.limits.compile_timeout_s, cancel=cancel
        )

    def _run_program(
        self,
        language: Language,
        argv: list[str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome:
        if not os.path.isabs(argv[0]):  # a runtime by name (java, node)
            resolved = resolve_program(argv[0], self._toolchain_path()[0])
            if resolved is None:
                return missing_program(argv[0], language.install_hint)
            argv = [resolved, *argv[1:]]
        return self._runner.run_block(
            language,
            argv,
            code_file=None,
            limits=self.limits,
            cancel=cancel,
            on_output=on_output,
            stdin=stdin,
        )

    def _toolchain_path(self) -> tuple[str, str]:
        assert self._python is not None
        return self._child_env["PATH"], self._python

    def _execute(
        self,
        language: Language,
        code_path: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,
        stdin: str | None = None,
    ) -> Outcome:
        assert language.command is not None and self._python is not None
        if not code_path.startswith(INTERNAL_DIR + "/"):
            # a named block's folders, made by execbox, are the blocks' to write in (a jail's id)
            self.give_to_blocks([code_path])
        program = language.command[0]
        resolved = self._python if program == PYTHON else resolve_program(program, self._child_env["PATH"])
        if resolved is None:  # checked by the base class; the PATH may have changed since
            return missing_program(program, language.install_hint)
        return self._runner.run_block(
            language,
            [resolved, *language.command[1:], code_path],
            code_file=code_path,
            limits=self.limits,
            cancel=cancel,
            on_output=on_output,
            source=source,
            stdin=stdin,
        )


def reserving(language: Language, limits: Limits) -> tuple[str, ...] | None:
    """A runner's ``reserves`` for ``language``: None, or its options for ``Limits.memory_mb``."""
    if not language.reserves_address_space:
        return None
    if language.memory_option and limits.memory_mb:
        return (language.memory_option.format(mb=limits.memory_mb),)
    return ()


def with_options(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` with ``options`` after the program's name."""
    return [argv[0], *options, *argv[1:]]


def child_environment(
    *, bin_dir: str, extra: Mapping[str, str], user: Mapping[str, str], inherit: bool
) -> dict[str, str]:
    """The environment of a block: minimal unless ``inherit``."""
    host = os.environ
    env = dict(host) if inherit else {k: host[k] for k in PASSED_THROUGH if k in host}
    env.setdefault("LANG", "C.UTF-8")
    env["PATH"] = os.pathsep.join(p for p in (bin_dir, host.get("PATH", os.defpath)) if p)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "utf-8", "MPLBACKEND": "Agg"})
    env.update(extra)
    env.update(user)
    return env
