"""``PythonTool``: a function-calling tool that runs Python a model wrote.

    >>> from execbox.tools import PythonTool
    >>> with PythonTool() as tool:                      # the sandbox backend
    ...     tools = [tool.openai_schema()]              # or tool.anthropic_schema()
    ...     reply = tool.call(tool_call.function.arguments)
    >>> reply
    {'success': True, 'stdout': '2\\n', 'stderr': '', 'error': None, 'files': []}

``tool.as_function()`` is the tool as a plain function for AG2, AutoGen and
LangChain (``_as_function``). What a model's ``libraries`` become, by
environment (``_libraries``):

- ``Venv()`` (local or sandbox backend): the executor is switched
  (``executor.with_libraries``, then ``use_environment``, which restarts it)
  to a Venv with the packages added, cached by spec; later calls keep it:
  the set only grows.
- ``DockerPython`` (docker backend): the same with a derived image, built
  locally with the packages added.
- ``SystemPython``, a ``Venv(path=...)``, the jupyter backend, or
  ``install_libraries=False``: nothing is installed. Libraries already
  installed pass; a missing one fails the call with an error saying how to
  create the tool so that it installs.

Libraries already present (distribution name and version, checked where the
code runs) are not installed again. Installing (not counted in ``timeout``)
runs on the host for a Venv (uv or pip: a package with only a source archive
is built there, outside any sandbox); for Docker, wheels only.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Literal, Self, overload

from .._errors import ConfigurationError
from .._models import CodeBlock, ExecutionResult, Limits
from .._progress import OnProgress, check_on_progress
from .._workspace import Workspace
from ..backends import Executor, create_executor
from ..environments import DockerPython, Environment
from ._as_function import tool_function
from ._bounded_json import loads as bounded_loads
from ._libraries import Libraries, Rejected, requirements

__all__ = ["PythonTool"]

DEFAULT_TIMEOUT_S = 30.0
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_ARGUMENTS = ("code", "libraries")
_EXAMPLE = '{"code": "print(1 + 1)"}'


class PythonTool:
    """Run Python a model sends through function calling; answer with a dict.

    - ``executor``: the executor to run in (the caller closes it). Or let the
      tool build one of ``backend`` (default: execbox's default, "sandbox";
      "docker" when ``environment`` is a ``DockerPython``) with
      ``environment``, ``workspace`` (default: a temporary one) and
      ``timeout`` seconds per call (default 30); the tool closes it.
    - ``name``, ``description``: what the model sees (the default description
      follows the backend: fresh process or shared session, installs or not).
    - ``install_libraries``: False never installs what ``libraries`` names
      (missing ones fail the call).
    - ``on_progress``: gets the steps of installing ``libraries`` and of the
      start of the executor the tool builds (a callable taking each step's
      text; default: a spinner on a terminal, ``execbox`` log lines
      otherwise; False: nothing).

    ``tool(code, libraries=None)`` and ``tool.call(arguments)`` return
    ``{"success", "stdout", "stderr", "error", "files"}``.

    Agent frameworks that make tools of functions (AG2's
    ``register_function``, AutoGen's ``FunctionTool``, LangChain's ``@tool``)
    refuse the tool object itself: give them ``tool.as_function()``.
    """

    def __init__(
        self,
        executor: Executor | None = None,
        *,
        backend: str | None = None,
        environment: Environment | None = None,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        name: str = "python",
        description: str | None = None,
        install_libraries: bool = True,
        on_progress: OnProgress = None,
    ) -> None:
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ConfigurationError(
                f"PythonTool(name={name!r}): use 1 to 64 letters, digits, '_' or '-' "
                "(what OpenAI and Anthropic accept)"
            )
        if description is not None and not (isinstance(description, str) and description.strip()):
            raise ConfigurationError(
                "PythonTool(description=...) must be a non-empty str, or None for the default"
            )
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0
        ):
            raise ConfigurationError(f"PythonTool(timeout={timeout!r}) must be a positive number of seconds")
        self._owns_executor = executor is None
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(
                f"PythonTool(executor=...) takes an execbox Executor, not {type(executor).__name__}"
            )
        given = [
            k
            for k, v in (
                ("backend", backend),
                ("environment", environment),
                ("workspace", workspace),
                ("timeout", timeout),
            )
            if v is not None
        ]
        if executor is not None and given:
            raise ConfigurationError(
                f"PythonTool: give executor= or {'/'.join(f'{k}=' for k in given)}, not both (set "
                "those on the executor: its workspace, environment and Limits(timeout_s=...))"
            )
        check_on_progress(on_progress, "PythonTool")
        self._executor = (
            executor
            if executor is not None
            else _build(backend, environment, workspace, timeout, on_progress)
        )
        self.name = name
        self._description = description
        self._libraries = Libraries(self._executor, install=install_libraries, on_progress=on_progress)

    def __repr__(self) -> str:
        return f"PythonTool(name={self.name!r}, executor={self._executor!r})"

    # -- what it is ------------------------------------------------------------

    @property
    def executor(self) -> Executor:
        """The executor the code runs in (its environment grows with ``libraries``)."""
        return self._executor

    @property
    def workspace(self) -> Workspace:
        """The code's working directory; ``files`` are relative to it."""
        return self._executor.workspace

    @property
    def install_libraries(self) -> bool:
        """False: ``libraries`` that are missing are never installed."""
        return self._libraries.install

    @install_libraries.setter
    def install_libraries(self, value: bool) -> None:
        self._libraries.install = value

    @property
    def can_install(self) -> bool:
        """True when ``libraries`` that are missing get installed."""
        return self._libraries.blocker([]) is None

    @property
    def description(self) -> str:
        return self._description or self._default_description()

    def _default_description(self) -> str:
        if self._executor.capabilities.stateful:
            state = (
                "Calls share one Python session: variables, functions and imports carry over to later calls. "
            )
        else:
            state = (
                "Each call runs in a fresh Python process, so variables do not carry over: send "
                "complete code each time. Files written to the current directory do carry over. "
            )
        libraries = (
            "List the PyPI packages the code needs in `libraries`; missing ones are installed before it runs."
            if self.can_install
            else "Only packages already installed can be imported (none can be installed); "
            "`libraries` checks that the ones listed are present."
        )
        return (
            f"Run Python code and return what it printed (stdout, stderr), the error if it failed, "
            f"and the files it created or changed. {state}Use print() to show results. Stops "
            f"after {self._executor.limits.timeout_s:g} s. {libraries}"
        )

    def parameters(self, *, strict: bool = False) -> dict[str, Any]:
        """The JSON schema of the arguments. ``strict``: every property
        required, ``libraries`` nullable (OpenAI's strict mode)."""
        libraries_help = "PyPI requirement strings such as 'numpy' or 'pandas>=2'; " + (
            "installed when missing." if self.can_install else "must be installed already."
        )
        libraries: dict[str, Any] = {
            "type": ["array", "null"] if strict else "array",
            "items": {"type": "string"},
            "description": libraries_help,
        }
        return {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The Python code to run."},
                "libraries": libraries,
            },
            "required": list(_ARGUMENTS) if strict else ["code"],
            "additionalProperties": False,
        }

    def openai_schema(self, *, strict: bool = False) -> dict[str, Any]:
        """The tool for OpenAI's Chat Completions ``tools=[...]``."""
        function: dict[str, Any] = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters(strict=strict),
        }
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def anthropic_schema(self) -> dict[str, Any]:
        """The tool for Anthropic's Messages ``tools=[...]``."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters()}

    @overload
    def as_function(
        self, *, name: str | None = None, asynchronous: Literal[False] = False
    ) -> Callable[..., dict[str, Any]]: ...
    @overload
    def as_function(
        self, *, name: str | None = None, asynchronous: Literal[True]
    ) -> Callable[..., Awaitable[dict[str, Any]]]: ...

    def as_function(
        self, *, name: str | None = None, asynchronous: bool = False
    ) -> Callable[..., dict[str, Any]] | Callable[..., Awaitable[dict[str, Any]]]:
        """The tool as a plain function for agent frameworks (AG2
        ``register_function``, AutoGen ``FunctionTool``, LangChain ``@tool``):
        ``name(code: str, libraries: list[str] | None = None) -> dict``, named
        ``name`` (default: the tool's), the description as its docstring.
        ``asynchronous``: a coroutine function over ``arun`` (cancelling it
        kills the code), which AutoGen runs without a thread. It calls this
        tool: close the tool when done with the function."""
        name = self.name if name is None else name
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ConfigurationError(
                f"PythonTool.as_function(name={name!r}): use 1 to 64 letters, digits, '_' "
                "or '-' (what OpenAI and Anthropic accept)"
            )
        return tool_function(self, name=name, asynchronous=asynchronous)

    # -- calling ---------------------------------------------------------------

    def __call__(self, code: str, libraries: Sequence[str] | None = None) -> dict[str, Any]:
        """Run ``code`` after making ``libraries`` available."""
        try:
            code, wanted = _checked(code, libraries)
            self._libraries.ensure(wanted)
        except Rejected as exc:
            return _failure(str(exc))
        with self._libraries.gate.running():
            result = self._executor.run(CodeBlock("python", code))
        return self._answer(result)

    def call(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        """Run a model's tool call: its arguments as the JSON text or the dict."""
        try:
            parsed = _parse_arguments(arguments)
        except Rejected as exc:
            return _failure(str(exc))
        return self(parsed["code"], parsed.get("libraries"))

    async def arun(self, code: str, libraries: Sequence[str] | None = None) -> dict[str, Any]:
        """``tool(code, libraries)`` for asyncio; cancelling kills the code."""
        try:
            code, wanted = _checked(code, libraries)
            await asyncio.to_thread(self._libraries.ensure, wanted)
        except Rejected as exc:
            return _failure(str(exc))
        while not self._libraries.gate.enter(wait=False):  # an environment switch: rare and short
            await asyncio.sleep(0.05)
        try:
            result = await self._executor.arun(CodeBlock("python", code))
        finally:
            self._libraries.gate.leave()
        return self._answer(result)

    async def acall(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        """``call`` for asyncio."""
        try:
            parsed = _parse_arguments(arguments)
        except Rejected as exc:
            return _failure(str(exc))
        return await self.arun(parsed["code"], parsed.get("libraries"))

    def _answer(self, result: ExecutionResult) -> dict[str, Any]:
        return {
            "success": result.ok,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "error": self._error_text(result),
            "files": list(result.files),
        }

    def _error_text(self, result: ExecutionResult) -> str | None:
        if result.ok:
            return None
        if result.timed_out:
            limit = self._executor.limits.timeout_s
            setting = "PythonTool(timeout=...)" if self._owns_executor else "the executor's Limits.timeout_s"
            return (
                f"Timeout: the code ran longer than {limit:g} s and was stopped, with every process it "
                f"started ({setting}); the output printed before that is in stdout/stderr"
            )
        if result.error is not None:
            name, value = result.error.name, result.error.value.strip()
            return f"{name}: {value}" if value else name
        return f"ExitStatus: exit code {result.exit_code}"

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close the executor if the tool built it (a given one is the caller's)."""
        if self._owns_executor:
            self._executor.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> Self:
        self._executor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self._executor.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _build(
    backend: str | None,
    environment: Environment | None,
    workspace: Any,
    timeout: float | None,
    on_progress: OnProgress,
) -> Executor:
    if isinstance(environment, DockerPython):
        if backend not in (None, "docker"):
            raise ConfigurationError(
                f"PythonTool(backend={backend!r}, environment=DockerPython(...)): a "
                "DockerPython runs on the docker backend: use backend='docker' or leave it out"
            )
        backend = "docker"
    options: dict[str, Any] = {
        "workspace": workspace,
        "limits": Limits(timeout_s=DEFAULT_TIMEOUT_S if timeout is None else timeout),
    }
    if environment is not None:
        options["environment"] = environment
    if on_progress is not None:  # (None: the backend's default)
        options["on_progress"] = on_progress
    return create_executor(backend, **options)


def _failure(error: str) -> dict[str, Any]:
    return {"success": False, "stdout": "", "stderr": "", "error": error, "files": []}


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict with ``code`` (raises ``Rejected``)."""
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            arguments = bounded_loads(arguments)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, TooDeep
            raise Rejected(
                f"InvalidArguments: the arguments are not valid JSON ({exc}): send a JSON object "
                f"such as {_EXAMPLE}"
            ) from None
    if not isinstance(arguments, Mapping):
        raise Rejected(
            f"InvalidArguments: the arguments must be a JSON object such as {_EXAMPLE}, not "
            f"{_json_type(arguments)}"
        )
    unknown = sorted(str(k) for k in arguments if k not in _ARGUMENTS)
    if unknown:
        raise Rejected(
            f"InvalidArguments: unknown argument{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}: this tool takes 'code' (required) and "
            "'libraries' (optional)"
        )
    if "code" not in arguments:
        raise Rejected(f"InvalidArguments: 'code' is missing: send the Python code to run, as in {_EXAMPLE}")
    return dict(arguments)


def _checked(code: Any, libraries: Any) -> tuple[str, tuple[str, ...]]:
    """The code and the canonical requirement strings (raises ``Rejected``)."""
    if not isinstance(code, str):
        raise Rejected(f"InvalidArguments: 'code' must be a string of Python code, not {_json_type(code)}")
    if not code.strip():
        raise Rejected("InvalidArguments: 'code' is empty: send the Python code to run")
    if libraries is None:
        return code, ()
    if isinstance(libraries, (str, bytes)) or not isinstance(libraries, (list, tuple)):
        raise Rejected(
            "InvalidArguments: 'libraries' must be an array of package names such as "
            f'["numpy", "pandas>=2"], not {_json_type(libraries)}'
        )
    return code, requirements(libraries)


def _json_type(value: Any) -> str:
    kinds = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return kinds.get(type(value)) or (
        "an array"
        if isinstance(value, (list, tuple))
        else "an object"
        if isinstance(value, Mapping)
        else type(value).__name__
    )
