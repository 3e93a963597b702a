"""execbox executors as AG2 code executors (``autogen.coding.CodeExecutor``).

    >>> from autogen import ConversableAgent
    >>> from execbox.integrations.ag2 import AG2CodeExecutor
    >>> runner = AG2CodeExecutor(backend="sandbox", limits=execbox.Limits(timeout_s=30))
    >>> agent = ConversableAgent("runner", llm_config=False, human_input_mode="NEVER",
    ...                          code_execution_config=runner.code_execution_config())

The agent finds code blocks with ``runner.code_extractor`` (execbox's own
extractor: language aliases, ``~~~`` fences, ``# filename:`` comments and
``python:app.py`` info strings), runs them on the execbox executor and replies
``exitcode: 0 (execution succeeded)\\nCode output: ...``. Needs AG2
(execbox's ``ag2`` extra), whose module is ``autogen``.

As a drop-in for AG2's ``LocalCommandLineCodeExecutor`` it takes AG2's
option names: ``timeout`` (``limits=Limits(timeout_s=...)``), ``work_dir``
(``workspace=``; its parent must exist, as AG2's), ``virtual_env_context``
(``environment=Venv(path=...)``), ``cleanup_temp_files`` (AutoGen's: the
adapter removes each block's code file after the run; ``code_file`` still
names it),
``functions``, ``functions_module`` and ``execution_policies`` (execbox's
names too); a peer option with no meaning here (``bind_dir``,
``venv_path``...) is a ``ConfigurationError`` naming execbox's way. It has
AG2's ``timeout``, ``work_dir``, ``functions_module`` and
``format_functions_for_prompt()``. A function whose ``global_imports``
cannot be imported where the blocks run is refused at the first run, with
a ``ConfigurationError`` (a ``ValueError``, as AG2's "Functions failed to
load") naming the import.

AG2's own executor tests (test/coding/test_commandline_code_executor.py
and test_user_defined_functions.py), run against this adapter with
AG2's ``LocalCommandLineCodeExecutor`` as ``backend="local"`` and its
``DockerCommandLineCodeExecutor`` as ``backend="docker"`` (``image=``
dropped: execbox's default image, as AG2's ``python:3-slim`` cannot be
pulled offline): local 28 of 36 pass, docker 13 of 14 (not applicable:
Windows shells; ``pip install`` in a container, which has no network by
default; ``DEFAULT_EXECUTION_POLICY``, AG2's own table of languages). The
differences, on purpose:

- JavaScript blocks run (AG2 saves them without running): execbox has a
  JavaScript runtime; ``execution_policies={"javascript": "save"}`` gives
  AG2's behaviour. In a docker image without node the block fails, naming
  what is missing.
- No ``sanitize_command`` (AG2's deny-list of ``rm -rf``, ``dd``, fork
  bombs...; 5 tests): execbox confines what a block can do (the sandbox
  backend) rather than filtering its text.
- ``@with_requirements(python_packages=[...])`` are never pip-installed into
  a system Python (AG2 installs them into the interpreter it runs in): give
  ``environment=Venv()`` and execbox installs them in a venv of its cache;
  else the first run names what is missing.
- ``CodeExecutorFactory.create({"executor": "commandline-local"})`` makes
  AG2's own executor: pass ``{"executor": AG2CodeExecutor(...)}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Self

from .._errors import install_hint

try:
    from autogen.coding import CodeBlock as _AG2CodeBlock
    from autogen.coding import CodeExecutor as _AG2CodeExecutor
    from autogen.coding import CodeExtractor as _AG2CodeExtractor
    from autogen.coding.base import CommandLineCodeResult as _AG2CommandLineCodeResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "execbox.integrations.ag2 needs AG2 (its module is 'autogen', with autogen.coding): "
        f"{install_hint('ag2')} ({exc})"
    ) from exc

from pydantic import Field

from .._extract import extract_from_messages
from .._models import ExecutionResult
from ..backends import Executor
from ._common import PeerAttributes, as_execbox_block, warn_stateless_restart

__all__ = ["AG2CodeBlock", "AG2CodeExecutor", "AG2CodeResult", "ExecboxCodeExtractor"]


class AG2CodeBlock(_AG2CodeBlock):
    """AG2's ``CodeBlock`` with what execbox's extractor also found: the file
    the model asked to save the block in, and whether the language was guessed."""

    filename: str | None = Field(default=None, description="Where to save the block in the workspace.")
    language_inferred: bool = Field(default=False, description="The fence named no language.")


class AG2CodeResult(_AG2CommandLineCodeResult):
    """AG2's ``CommandLineCodeResult`` (``exit_code``, ``output``,
    ``code_file``) plus the files the run created or changed and the full
    execbox result (``execution``, not serialized)."""

    output_files: list[str] = Field(
        default_factory=list, description="Absolute paths of the files the run created or changed."
    )
    execution: ExecutionResult | None = Field(default=None, exclude=True, repr=False)


class ExecboxCodeExtractor(_AG2CodeExtractor):
    """An AG2 ``CodeExtractor`` built on ``execbox.extract_code_blocks``."""

    def extract_code_blocks(self, message: Any) -> list[_AG2CodeBlock]:
        """The closed fenced blocks in ``message`` (a string, a list of
        OpenAI content parts, or None)."""
        blocks = extract_from_messages([{"content": message}])
        return [
            AG2CodeBlock(
                code=b.code, language=b.language, filename=b.filename, language_inferred=b.language_inferred
            )
            for b in blocks
        ]


class AG2CodeExecutor(PeerAttributes, _AG2CodeExecutor):
    """Runs AG2 agents' code blocks on an execbox executor.

    Give an executor (``AG2CodeExecutor(execbox.SandboxExecutor(...))``), or
    a backend name and its options (``AG2CodeExecutor(backend="local",
    workspace="work", limits=Limits(timeout_s=30))``); with neither, the
    default backend. ``close()`` (or leaving a ``with`` block) closes the
    execbox executor, also one that was given.

    Results follow AG2's command-line executors: blocks run in order and stop
    at the first failure; ``output`` is what a terminal would have shown,
    then execbox's notes (timeouts, files created); ``code_file`` is the
    absolute path of the first block's file. A failure of the code is a
    non-zero ``exit_code``, never an exception.
    """

    def __init__(
        self, executor: Executor | None = None, *, backend: str | None = None, **options: Any
    ) -> None:
        self.executor = self._adopt("AG2CodeExecutor", executor, backend, options)
        self._extractor = ExecboxCodeExtractor()

    def __repr__(self) -> str:
        return f"AG2CodeExecutor({self.executor!r})"

    def _wrapped(self) -> Executor:
        return self.executor

    @property
    def code_extractor(self) -> ExecboxCodeExtractor:
        """The extractor AG2 agents use to find code in a message."""
        return self._extractor

    def execute_code_blocks(self, code_blocks: Sequence[_AG2CodeBlock]) -> AG2CodeResult:
        """Run the blocks in order; the result has AG2's ``exit_code`` and
        ``output`` (the agent adds the ``exitcode: ...`` line)."""
        blocks = [as_execbox_block(b.code, b.language, getattr(b, "filename", None)) for b in code_blocks]
        result = self.executor.run(blocks)
        return AG2CodeResult(**self._result_fields(self.executor, blocks, result))

    def restart(self) -> None:
        """Stop what runs and the backend's processes (a Jupyter kernel loses
        its state); the executor stays usable. On a backend that keeps no
        state (local, sandbox) a ``UserWarning`` says there was nothing to
        restart, as AG2's local executor warns."""
        self.executor.restart()
        warn_stateless_restart("AG2CodeExecutor", self.executor)

    def close(self) -> None:
        """Close the execbox executor (a temporary workspace is removed)."""
        self.executor.close()

    def __enter__(self) -> Self:
        self.executor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def code_execution_config(self, *, last_n_messages: int | Literal["auto"] = "auto") -> dict[str, Any]:
        """The ``code_execution_config`` for an AG2 agent that runs code with
        this executor. ``last_n_messages`` is how far back the agent looks
        for code ("auto": the messages since it last spoke)."""
        return {"executor": self, "last_n_messages": last_n_messages}
