"""execbox executors as AutoGen code executors (``autogen_core.code_executor.CodeExecutor``).

    >>> from autogen_agentchat.agents import CodeExecutorAgent
    >>> from execbox.integrations.autogen import AutoGenCodeExecutor
    >>> async with AutoGenCodeExecutor(backend="sandbox") as code_executor:
    ...     agent = CodeExecutorAgent("runner", code_executor=code_executor)
    ...     result = await agent.run(task="```python\\nprint(6 * 7)\\n```")

Blocks run with ``Executor.arun``; cancelling the ``CancellationToken``
kills what the block started and returns a result with exit code 130 (the
executor stays usable), as AutoGen's own executors return a result on
cancellation. The adapter is an AutoGen component: ``dump_component()``
saves the backend and the executor's options (``Executor.to_config()``),
``load_component()`` makes a new executor from them. Needs autogen-core
(``pip install 'execbox[autogen]'``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

try:
    from autogen_core import CancellationToken, Component
    from autogen_core.code_executor import CodeBlock as _CodeBlock
    from autogen_core.code_executor import CodeExecutor as _CodeExecutor
    from autogen_core.code_executor import CodeResult as _CodeResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"execbox.integrations.autogen needs autogen-core: pip install 'execbox[autogen]' ({exc})"
    ) from exc

from pydantic import BaseModel, Field

from .._errors import ConfigurationError, ExecutorClosedError
from .._models import ExecutionResult
from ..backends import Executor, executor_from_config
from ._common import as_execbox_block, code_file, make_executor, output_files

__all__ = ["CANCELLED_EXIT_CODE", "AutoGenCodeExecutor", "AutoGenCodeExecutorConfig", "AutoGenCodeResult"]

# 128 + SIGINT, as execbox reports a block cancelled before it ran.
CANCELLED_EXIT_CODE = 130


@dataclass
class AutoGenCodeResult(_CodeResult):
    """AutoGen's ``CodeResult`` (``exit_code``, ``output``) with the fields
    of autogen-ext's ``CommandLineCodeResult`` (``code_file``), the files the
    run created or changed, and the full execbox result (``execution``; None
    when the run was cancelled)."""

    code_file: str | None = None
    output_files: list[str] = field(default_factory=list)
    execution: ExecutionResult | None = field(default=None, repr=False, compare=False)


class AutoGenCodeExecutorConfig(BaseModel):
    """What ``dump_component()`` saves: the backend's name and the execbox
    executor's config (``Executor.to_config()``)."""

    backend: str = Field(description="The execbox backend: local, sandbox, jupyter, docker...")
    executor: dict[str, Any] = Field(
        description="The execbox executor's config, as Executor.to_config() returns it."
    )


class AutoGenCodeExecutor(_CodeExecutor, Component[AutoGenCodeExecutorConfig]):
    """Runs AutoGen agents' code blocks on an execbox executor.

    Give an executor (``AutoGenCodeExecutor(execbox.SandboxExecutor(...))``),
    or a backend name and its options (``AutoGenCodeExecutor(backend="local",
    limits=Limits(timeout_s=30))``); with neither, the default backend.

    ``start()`` starts the executor (running a block also does); ``stop()``
    closes it (a temporary workspace is removed); a ``start()`` or a run
    after ``stop()`` makes a new executor from the same config.
    ``restart()`` stops what runs and the backend's processes (a Jupyter
    kernel loses its state) and keeps the executor.
    """

    component_type = "code_executor"
    component_config_schema = AutoGenCodeExecutorConfig
    component_provider_override = "execbox.integrations.autogen.AutoGenCodeExecutor"

    def __init__(
        self, executor: Executor | None = None, *, backend: str | None = None, **options: Any
    ) -> None:
        self._executor = make_executor("AutoGenCodeExecutor", executor, backend, options)
        self._stopped = False

    def __repr__(self) -> str:
        return f"AutoGenCodeExecutor({self._executor!r})"

    @property
    def executor(self) -> Executor:
        """The execbox executor the blocks run on."""
        return self._executor

    # -- running --------------------------------------------------------------

    async def execute_code_blocks(
        self, code_blocks: list[_CodeBlock], cancellation_token: CancellationToken
    ) -> AutoGenCodeResult:
        """Run the blocks in order, stopping at the first failure.

        A block without a language gets one inferred; a ``# filename:``
        comment on its first line saves it under that name in the workspace.
        A failure of the code is a non-zero ``exit_code``; an empty list
        raises ``execbox.NoCodeBlocksError`` (a ``ValueError``)."""
        blocks = [as_execbox_block(b.code, b.language, getattr(b, "filename", None)) for b in code_blocks]
        executor = self._usable()
        if cancellation_token.is_cancelled():
            return _cancelled("", ran=False)
        loop = asyncio.get_running_loop()
        printed: list[str] = []
        run = loop.create_task(executor.arun(blocks, on_output=lambda _stream, text: printed.append(text)))
        by_token = False

        def cancel() -> None:  # may be called from any thread
            nonlocal by_token
            if run.done():
                return
            by_token = True
            try:
                loop.call_soon_threadsafe(run.cancel)
            except RuntimeError:  # the loop is closed: nothing left to cancel
                pass

        cancellation_token.add_callback(cancel)
        try:
            result = await run
        except asyncio.CancelledError:
            if not by_token or _cancelling():
                raise
            return _cancelled("".join(printed), ran=True)
        return AutoGenCodeResult(
            exit_code=result.exit_code,
            output=result.to_text("plain"),
            code_file=code_file(executor, result),
            output_files=output_files(executor, result),
            execution=result,
        )

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        """Start the executor (a sandbox's warm pool, a Jupyter kernel...)."""
        await asyncio.to_thread(self._usable().start)

    async def stop(self) -> None:
        """Close the executor and release what it holds."""
        self._stopped = True
        await self._executor.aclose()

    async def restart(self) -> None:
        """Stop what runs and the backend's processes; the executor stays usable."""
        await asyncio.to_thread(self._usable().restart)

    def _usable(self) -> Executor:
        if self._stopped:
            try:
                self._executor = executor_from_config(self._executor.to_config())
            except ConfigurationError as exc:
                raise ExecutorClosedError(self._executor.name) from exc
            self._stopped = False
        return self._executor

    # -- component config -----------------------------------------------------

    def _to_config(self) -> AutoGenCodeExecutorConfig:
        return AutoGenCodeExecutorConfig(backend=self._executor.name, executor=self._executor.to_config())

    @classmethod
    def _from_config(cls, config: AutoGenCodeExecutorConfig) -> AutoGenCodeExecutor:
        saved = dict(config.executor)
        if saved.setdefault("backend", config.backend) != config.backend:
            raise ConfigurationError(
                f"AutoGenCodeExecutor config names backend {config.backend!r} but its executor config "
                f"is for {saved['backend']!r}: make the two agree (or drop 'backend' from 'executor')"
            )
        return cls(executor_from_config(saved))


def _cancelled(printed: str, *, ran: bool) -> AutoGenCodeResult:
    if printed and not printed.endswith("\n"):
        printed += "\n"
    note = "what the code started was stopped" if ran else "the code did not run"
    return AutoGenCodeResult(
        exit_code=CANCELLED_EXIT_CODE, output=f"{printed}Cancelled (CancellationToken): {note}.\n"
    )


def _cancelling() -> bool:
    """Is the task running us being cancelled itself (not only the run)?"""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling and cancelling())
