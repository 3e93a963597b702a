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
(``pip install 'execbox[ag2]'``), whose module is ``autogen``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Self

try:
    from autogen.coding import CodeBlock as _AG2CodeBlock
    from autogen.coding import CodeExecutor as _AG2CodeExecutor
    from autogen.coding import CodeExtractor as _AG2CodeExtractor
    from autogen.coding.base import CommandLineCodeResult as _AG2CommandLineCodeResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        "execbox.integrations.ag2 needs AG2 (its module is 'autogen', with autogen.coding): "
        f"pip install 'execbox[ag2]' ({exc})"
    ) from exc

from pydantic import Field

from .._extract import extract_from_messages
from .._models import ExecutionResult
from ..backends import Executor
from ._common import as_execbox_block, code_file, make_executor, output_files

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


class AG2CodeExecutor(_AG2CodeExecutor):
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
        self.executor = make_executor("AG2CodeExecutor", executor, backend, options)
        self._extractor = ExecboxCodeExtractor()

    def __repr__(self) -> str:
        return f"AG2CodeExecutor({self.executor!r})"

    @property
    def code_extractor(self) -> ExecboxCodeExtractor:
        """The extractor AG2 agents use to find code in a message."""
        return self._extractor

    def execute_code_blocks(self, code_blocks: Sequence[_AG2CodeBlock]) -> AG2CodeResult:
        """Run the blocks in order; the result has AG2's ``exit_code`` and
        ``output`` (the agent adds the ``exitcode: ...`` line)."""
        blocks = [as_execbox_block(b.code, b.language, getattr(b, "filename", None)) for b in code_blocks]
        result = self.executor.run(blocks)
        return AG2CodeResult(
            exit_code=result.exit_code,
            output=result.to_text("plain"),
            code_file=code_file(self.executor, result),
            output_files=output_files(self.executor, result),
            execution=result,
        )

    def restart(self) -> None:
        """Stop what runs and the backend's processes (a Jupyter kernel loses
        its state); the executor stays usable."""
        self.executor.restart()

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
