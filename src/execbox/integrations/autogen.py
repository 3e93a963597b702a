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
(execbox's ``autogen`` extra).

As a drop-in for autogen-ext's ``LocalCommandLineCodeExecutor`` it takes
its option names: ``timeout`` (``limits=Limits(timeout_s=...)``),
``work_dir`` (``workspace=``; its parent must exist, as AutoGen's),
``virtual_env_context`` (``environment=Venv(path=...)``),
``cleanup_temp_files`` or the docker executor's ``delete_tmp_files`` (the
adapter removes each block's code file after the run; ``code_file`` is
still its path, as AutoGen's; saved by ``dump_component()``), ``functions``
and ``functions_module`` (execbox's names too); ``work_dir=None`` is a
temporary workspace, removed by ``stop()``. A peer option with no meaning
here (``bind_dir``, ``venv_path``, ``extra_volumes``...) is a
``ConfigurationError`` naming execbox's way. It has AutoGen's ``timeout``,
``work_dir``, ``bind_dir`` (the workspace folder), ``functions_module`` and
``format_functions_for_prompt()``; ``output_files`` also lists the files a
Jupyter kernel's images and HTML were saved in. A function whose ``global_imports``
cannot be imported where the blocks run is refused at the first run, with
a ``ConfigurationError`` (a ``ValueError``, as AutoGen's) naming the import.

autogen-ext's own tests (``tests/code_executors/``), run against this
adapter: test_commandline_code_executor.py and
test_user_defined_functions.py (local executor as ``backend="local"``;
the Windows PowerShell and uv-venv tests not applicable) 18 of 20 pass;
test_docker_commandline_code_executor.py (as ``backend="docker"``,
``image=`` dropped: execbox's default image) 12 of 14 (not applicable: the
peer's unset-``work_dir`` error and its ``work_dir="."`` deprecation);
test_jupyter_code_executor.py (as ``backend="jupyter"``, its
``JupyterCodeResult`` read as ``AutoGenCodeResult``) 1 of 11. The
differences, on purpose:

- JavaScript and the other languages execbox runs are run (AutoGen's local
  executor runs Python and shell only; AG2's saves JavaScript): refuse or
  save them with ``execution_policies={"javascript": "save"}``.
- ``cleanup_temp_files`` is off unless given (AutoGen's default is on):
  execbox keeps code files by default (``keep_code_files=True``).
- A code file that cannot be removed is left without a logged error
  (execbox's workspace removal never follows a link, and ignores a failure).
- ``@with_requirements(python_packages=[...])`` are never pip-installed into
  a system Python: give ``environment=Venv()`` and execbox installs them in
  a venv of its cache; else the first run names what is missing.
- ``timeout=0`` is refused with execbox's message ("give a number of
  seconds above 0"), not "Timeout must be greater than or equal to 1.".
- The docker executor's ``extra_volumes``, ``extra_hosts`` and
  ``init_command`` are not taken: give ``volumes=`` and
  ``container_create_kwargs=`` to the docker backend (no init command).
- On the jupyter backend a timeout or a cancelled token returns a result
  (exit code 124 or 130), as on the other backends, where AutoGen's
  ``JupyterCodeExecutor`` raises; a result names the block's code file
  (``code_file``), so it never equals a ``JupyterCodeResult`` without one;
  blocks' outputs are joined without a blank line between them; an image
  or HTML output is reported as "[image/png saved to PATH]", not as the
  object's text, and ``output_files`` are strings, not ``Path``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .._errors import install_hint

try:
    from autogen_core import CancellationToken, Component
    from autogen_core.code_executor import CodeBlock as _CodeBlock
    from autogen_core.code_executor import CodeExecutor as _CodeExecutor
    from autogen_core.code_executor import CodeResult as _CodeResult
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by the tests
    raise ImportError(
        f"execbox.integrations.autogen needs autogen-core: {install_hint('autogen')} ({exc})"
    ) from exc

from pydantic import BaseModel, Field

from .._errors import ConfigurationError, ExecutorClosedError
from .._models import ExecutionResult
from ..backends import Executor, executor_from_config
from ._common import PeerAttributes, as_execbox_block, warn_stateless_restart

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
    cleanup_temp_files: bool = Field(
        default=False, description="Remove each block's code file after the run (AutoGen's option)."
    )


class AutoGenCodeExecutor(PeerAttributes, _CodeExecutor, Component[AutoGenCodeExecutorConfig]):
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
        self._executor = self._adopt("AutoGenCodeExecutor", executor, backend, options)
        self._stopped = False

    def __repr__(self) -> str:
        return f"AutoGenCodeExecutor({self._executor!r})"

    def _wrapped(self) -> Executor:
        return self._executor

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
        return AutoGenCodeResult(**self._result_fields(executor, blocks, result))

    # -- lifecycle ------------------------------------------------------------

    async def start(self) -> None:
        """Start the executor (a sandbox's warm pool, a Jupyter kernel...)."""
        await asyncio.to_thread(self._usable().start)

    async def stop(self) -> None:
        """Close the executor and release what it holds."""
        self._stopped = True
        await self._executor.aclose()

    async def restart(self) -> None:
        """Stop what runs and the backend's processes; the executor stays
        usable. On a backend that keeps no state (local, sandbox) a
        ``UserWarning`` says there was nothing to restart, as AutoGen's local
        executor warns."""
        executor = self._usable()
        await asyncio.to_thread(executor.restart)
        warn_stateless_restart("AutoGenCodeExecutor", executor)

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
        return AutoGenCodeExecutorConfig(
            backend=self._executor.name, executor=self._executor.to_config(), cleanup_temp_files=self._cleanup
        )

    @classmethod
    def _from_config(cls, config: AutoGenCodeExecutorConfig) -> AutoGenCodeExecutor:
        saved = dict(config.executor)
        if saved.setdefault("backend", config.backend) != config.backend:
            raise ConfigurationError(
                f"AutoGenCodeExecutor config names backend {config.backend!r} but its executor config "
                f"is for {saved['backend']!r}: make the two agree (or drop 'backend' from 'executor')"
            )
        return cls(executor_from_config(saved), cleanup_temp_files=config.cleanup_temp_files)


def _cancelled(printed: str, *, ran: bool) -> AutoGenCodeResult:
    if printed and not printed.endswith("\n"):
        printed += "\n"
    note = "what the code started was stopped" if ran else "the code did not run"
    # Both peers' wordings: AutoGen's executors say "Code execution was cancelled".
    return AutoGenCodeResult(
        exit_code=CANCELLED_EXIT_CODE,
        output=f"{printed}Cancelled (CancellationToken). Code execution was cancelled: {note}.\n",
    )


def _cancelling() -> bool:
    """Is the task running us being cancelled itself (not only the run)?"""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return bool(cancelling and cancelling())
