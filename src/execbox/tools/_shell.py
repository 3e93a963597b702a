"""``ShellTool``: a shell command a model sends through function calling,
run on an execbox executor (the sandbox by default), answered with a dict.

    with ShellTool() as shell:
        shell.call('{"command": "ls -la && python3 --version"}')
    {'exit_code': 0, 'stdout': '...', 'stderr': '', 'error': None, 'files': []}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from .._errors import ConfigurationError
from .._models import CodeBlock, ExecutionResult, Limits
from .._workspace import Workspace
from ..backends import Executor, create_executor
from ._bounded_json import loads as bounded_loads

__all__ = ["ShellTool"]

DEFAULT_TIMEOUT_S = 30.0


class ShellTool:
    """Run shell commands (bash where the executor has it, else sh).

    - ``executor``: where to run (the caller closes it); or ``backend``,
      ``workspace`` and ``timeout`` seconds to build one the tool closes.
    - ``name``, ``description``: what the model sees.
    """

    def __init__(
        self,
        executor: Executor | None = None,
        *,
        backend: str | None = None,
        workspace: Workspace | str | None = None,
        timeout: float | None = None,
        name: str = "shell",
        description: str | None = None,
    ) -> None:
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(
                f"ShellTool(executor=...) takes an execbox Executor, not {type(executor).__name__}"
            )
        if executor is not None and (backend or workspace or timeout):
            raise ConfigurationError("ShellTool: give executor= or backend=/workspace=/timeout=, not both")
        self._owns_executor = executor is None
        self.executor = (
            executor
            if executor is not None
            else create_executor(
                backend, workspace=workspace, limits=Limits(timeout_s=timeout or DEFAULT_TIMEOUT_S)
            )
        )
        self.name = name
        self._description = description
        languages = self.executor.capabilities.languages
        self.language = "bash" if "bash" in languages else "sh"

    def __repr__(self) -> str:
        return f"ShellTool(name={self.name!r}, executor={self.executor!r})"

    @property
    def description(self) -> str:
        return self._description or (
            f"Run a shell command ({self.language}) in the working directory and return its exit code, "
            "output and the files it created or changed. Files stay between calls; nothing can be typed "
            f"into the command. Stops after {self.executor.limits.timeout_s:g} s."
        )

    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command line to run."}},
            "required": ["command"],
            "additionalProperties": False,
        }

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters()},
        }

    def anthropic_schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters()}

    def __call__(self, command: str) -> dict[str, Any]:
        if not isinstance(command, str) or not command.strip():
            return _failure("'command' must be a non-empty string")
        return _answer(self.executor.run(CodeBlock(self.language, command)))

    def call(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        command = _command(arguments)
        return command if isinstance(command, dict) else self(command)

    async def acall(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        command = _command(arguments)
        if isinstance(command, dict):
            return command
        if not command.strip():
            return _failure("'command' must be a non-empty string")
        return _answer(await self.executor.arun(CodeBlock(self.language, command)))

    def to_config(self) -> dict[str, Any]:
        return {
            "type": "ShellTool",
            "name": self.name,
            "description": self._description,
            "executor": self.executor.to_config(),
        }

    def close(self) -> None:
        if self._owns_executor:
            self.executor.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _command(arguments: str | bytes | Mapping[str, Any]) -> str | dict[str, Any]:
    try:
        parsed = bounded_loads(arguments) if isinstance(arguments, (str, bytes)) else arguments
    except ValueError as exc:
        return _failure(f'the arguments are not JSON ({exc}): send {{"command": "..."}}')
    if not isinstance(parsed, Mapping) or not isinstance(parsed.get("command"), str):
        return _failure('send {"command": "..."}: one string argument named \'command\'')
    return parsed["command"]


def _answer(result: ExecutionResult) -> dict[str, Any]:
    error = None
    if result.error is not None:
        error = f"{result.error.name}: {result.error.value}"
    elif result.exit_code != 0:
        error = f"the command exited with code {result.exit_code}"
    return {
        "exit_code": result.exit_code,
        "stdout": result.stdout,
        "stderr": result.stderr,
        "error": error,
        "files": list(result.files),
    }


def _failure(error: str) -> dict[str, Any]:
    return {"exit_code": None, "stdout": "", "stderr": "", "error": error, "files": []}
