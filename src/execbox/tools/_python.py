"""``PythonTool``: a function-calling tool that runs Python a model wrote.

    >>> from execbox.tools import PythonTool
    >>> with PythonTool() as tool:                      # the sandbox backend
    ...     tools = [tool.openai_schema()]              # or tool.anthropic_schema()
    ...     reply = tool.call(tool_call.function.arguments)
    >>> reply
    {'success': True, 'stdout': '2\\n', 'stderr': '', 'error': None, 'files': []}

What a model's ``libraries`` become, by environment:

- ``Venv()`` (local or sandbox backend): the executor is switched (its
  ``environment`` replaced, then restarted) to a Venv with the packages
  added, cached by spec; later calls keep it: the set only grows.
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
import json
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from .._errors import ConfigurationError, EnvironmentSetupError
from .._models import CodeBlock, ExecutionResult, Limits
from .._workspace import Workspace
from ..backends import Executor, create_executor
from ..backends.docker import DockerExecutor
from ..backends.jupyter import JupyterExecutor
from ..backends.local import LocalExecutor
from ..environments import DockerPython, Environment, SystemPython, Venv
from ..environments._venv import cache_dir

__all__ = ["PythonTool"]

DEFAULT_TIMEOUT_S = 30.0
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_OP = r"(?:===|==|!=|~=|<=|>=|<|>)\s*[A-Za-z0-9.*+!_-]+"
_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*"
    r"(?P<extras>\[\s*[A-Za-z0-9._-]+(?:\s*,\s*[A-Za-z0-9._-]+)*\s*\])?\s*"
    rf"(?P<spec>{_OP}(?:\s*,\s*{_OP})*)?\s*$"
)
_ARGUMENTS = ("code", "libraries")
_EXAMPLE = '{"code": "print(1 + 1)"}'
_PROBE_MARK = "__execbox_missing__="
# Which requirements are not satisfied in the environment (run inside it).
_PROBE = """\
def __execbox_probe(wanted):
    import importlib.metadata as md, json, re
    missing = []
    for req in wanted:
        name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
        spec = re.sub(r"^\\[[^\\]]*\\]", "", req[len(name):])  # extras are not checked
        try:
            have = md.version(name)
            if spec:  # a version is checked where packaging is installed, else counts as missing
                from packaging.specifiers import SpecifierSet
                if not SpecifierSet(spec).contains(have, prereleases=True):
                    raise LookupError(have)
        except Exception:
            missing.append(req)
    print(MARK + json.dumps(missing))
__execbox_probe(WANTED)
del __execbox_probe
"""


class _Rejected(Exception):
    """A call the tool answers with an error dict instead of running it."""


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

    ``tool(code, libraries=None)`` and ``tool.call(arguments)`` return
    ``{"success", "stdout", "stderr", "error", "files"}``.
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
    ) -> None:
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise ConfigurationError(f"PythonTool(name={name!r}): use 1 to 64 letters, digits, '_' or '-' "
                                     "(what OpenAI and Anthropic accept)")
        if description is not None and not (isinstance(description, str) and description.strip()):
            raise ConfigurationError("PythonTool(description=...) must be a non-empty str, or None for the default")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or timeout <= 0):
            raise ConfigurationError(f"PythonTool(timeout={timeout!r}) must be a positive number of seconds")
        self._owns_executor = executor is None
        if executor is not None and not isinstance(executor, Executor):
            raise ConfigurationError(f"PythonTool(executor=...) takes an execbox Executor, not "
                                     f"{type(executor).__name__}")
        given = [k for k, v in (("backend", backend), ("environment", environment),
                                ("workspace", workspace), ("timeout", timeout)) if v is not None]
        if executor is not None and given:
            raise ConfigurationError(
                f"PythonTool: give executor= or {'/'.join(f'{k}=' for k in given)}, not both (set "
                "those on the executor: its workspace, environment and Limits(timeout_s=...))")
        self._executor = executor if executor is not None else _build(backend, environment, workspace, timeout)
        self.name = name
        self._description = description
        self.install_libraries = install_libraries
        self._gate = _Gate()
        self._switch_lock = threading.Lock()
        self._available: set[str] = set()  # requirement keys known to be satisfied

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
    def can_install(self) -> bool:
        """True when ``libraries`` that are missing get installed."""
        return self._growth_blocker([]) is None

    @property
    def description(self) -> str:
        return self._description or self._default_description()

    def _default_description(self) -> str:
        if self._executor.capabilities.stateful:
            state = ("Calls share one Python session: variables, functions and imports carry over to "
                     "later calls. ")
        else:
            state = ("Each call runs in a fresh Python process, so variables do not carry over: send "
                     "complete code each time. Files written to the current directory do carry over. ")
        libraries = ("List the PyPI packages the code needs in `libraries`; missing ones are installed "
                     "before it runs." if self.can_install else
                     "Only packages already installed can be imported (none can be installed); "
                     "`libraries` checks that the ones listed are present.")
        return (f"Run Python code and return what it printed (stdout, stderr), the error if it failed, "
                f"and the files it created or changed. {state}Use print() to show results. Stops "
                f"after {self._executor.limits.timeout_s:g} s. {libraries}")

    def parameters(self, *, strict: bool = False) -> dict[str, Any]:
        """The JSON schema of the arguments. ``strict``: every property
        required, ``libraries`` nullable (OpenAI's strict mode)."""
        libraries_help = ("PyPI requirement strings such as 'numpy' or 'pandas>=2'; "
                          + ("installed when missing." if self.can_install else "must be installed already."))
        libraries: dict[str, Any] = {"type": ["array", "null"] if strict else "array",
                                     "items": {"type": "string"}, "description": libraries_help}
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
        function: dict[str, Any] = {"name": self.name, "description": self.description,
                                    "parameters": self.parameters(strict=strict)}
        if strict:
            function["strict"] = True
        return {"type": "function", "function": function}

    def anthropic_schema(self) -> dict[str, Any]:
        """The tool for Anthropic's Messages ``tools=[...]``."""
        return {"name": self.name, "description": self.description, "input_schema": self.parameters()}

    # -- calling ---------------------------------------------------------------

    def __call__(self, code: str, libraries: Sequence[str] | None = None) -> dict[str, Any]:
        """Run ``code`` after making ``libraries`` available."""
        try:
            code, wanted = _checked(code, libraries)
            self._ensure_libraries(wanted)
        except _Rejected as exc:
            return _failure(str(exc))
        with self._gate.running():
            result = self._executor.run(CodeBlock("python", code))
        return self._answer(result)

    def call(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        """Run a model's tool call: its arguments as the JSON text or the dict."""
        try:
            parsed = _parse_arguments(arguments)
        except _Rejected as exc:
            return _failure(str(exc))
        return self(parsed["code"], parsed.get("libraries"))

    async def arun(self, code: str, libraries: Sequence[str] | None = None) -> dict[str, Any]:
        """``tool(code, libraries)`` for asyncio; cancelling kills the code."""
        try:
            code, wanted = _checked(code, libraries)
            await asyncio.to_thread(self._ensure_libraries, wanted)
        except _Rejected as exc:
            return _failure(str(exc))
        while not self._gate.enter(wait=False):  # an environment switch: rare and short
            await asyncio.sleep(0.05)
        try:
            result = await self._executor.arun(CodeBlock("python", code))
        finally:
            self._gate.leave()
        return self._answer(result)

    async def acall(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
        """``call`` for asyncio."""
        try:
            parsed = _parse_arguments(arguments)
        except _Rejected as exc:
            return _failure(str(exc))
        return await self.arun(parsed["code"], parsed.get("libraries"))

    def _answer(self, result: ExecutionResult) -> dict[str, Any]:
        return {"success": result.ok, "stdout": result.stdout, "stderr": result.stderr,
                "error": self._error_text(result), "files": list(result.files)}

    def _error_text(self, result: ExecutionResult) -> str | None:
        if result.ok:
            return None
        if result.timed_out:
            limit = self._executor.limits.timeout_s
            setting = "PythonTool(timeout=...)" if self._owns_executor else "the executor's Limits.timeout_s"
            return (f"Timeout: the code ran longer than {limit:g} s and was stopped, with every process it "
                    f"started ({setting}); the output printed before that is in stdout/stderr")
        if result.error is not None:
            name, value = result.error.name, result.error.value.strip()
            return f"{name}: {value}" if value else name
        return f"ExitStatus: exit code {result.exit_code}"

    # -- libraries -------------------------------------------------------------

    def _ensure_libraries(self, wanted: tuple[str, ...]) -> None:
        """Make ``wanted`` importable, or raise ``_Rejected`` saying why not."""
        if all(_key(r) in self._available for r in wanted):
            return
        with self._switch_lock:  # one check-and-install at a time
            pending = [r for r in wanted if _key(r) not in self._available]
            if not pending:
                return
            missing = self._probe(pending)
            if missing:
                blocker = self._growth_blocker(missing)
                if blocker is not None:
                    raise _Rejected(blocker)
                environment = self._grown(missing)
                try:
                    if isinstance(environment, DockerPython):
                        environment.build()
                    else:
                        environment.prepare()
                except EnvironmentSetupError as exc:
                    raise _Rejected(f"LibraryInstallFailed: could not install {', '.join(missing)}: {exc}") \
                        from None
                with self._gate.switching():  # no run in flight while the environment changes
                    assert isinstance(self._executor, (LocalExecutor, DockerExecutor))
                    self._executor.environment = environment  # type: ignore[assignment]
                    self._executor.restart()
            self._available.update(_key(r) for r in pending)

    def _probe(self, wanted: list[str]) -> list[str]:
        """The requirements of ``wanted`` not satisfied where the code runs."""
        code = _PROBE.replace("MARK", repr(_PROBE_MARK)).replace("WANTED", repr(wanted))
        with self._gate.running():
            result = self._executor.run(CodeBlock("python", code))
        for line in result.stdout.splitlines():
            if line.startswith(_PROBE_MARK):
                found = json.loads(line[len(_PROBE_MARK):])
                return [r for r in wanted if r in found]
        return list(wanted)  # the check itself failed: assume nothing is there

    def _growth_blocker(self, missing: list[str]) -> str | None:
        """Why ``missing`` cannot be installed here (None: it can)."""
        names = ", ".join(missing) or "libraries"
        lead = (f"LibrariesUnavailable: {names} {'is' if len(missing) == 1 else 'are'} not installed and "
                "cannot be installed here: ")
        usable = "Use only installed packages, or "
        setup = ("create the tool with an environment it installs into: "
                 "PythonTool(environment=Venv()) on the local/sandbox backends, or "
                 "PythonTool(backend='docker', environment=DockerPython()).")
        executor = self._executor
        if not self.install_libraries:
            return f"{lead}installing is turned off (PythonTool(install_libraries=False)). {usable}turn it on."
        if isinstance(executor, DockerExecutor):
            return None
        if isinstance(executor, JupyterExecutor):
            return (lead + "the jupyter backend keeps one kernel whose environment the tool does not change. "
                    + usable + "preinstall them: JupyterExecutor(environment=Venv(packages=['ipykernel', ...])), "
                    "or " + setup)
        if isinstance(executor, LocalExecutor):
            env = executor.environment
            if isinstance(env, SystemPython):
                return lead + "the tool runs a shared system Python, which execbox never installs into. " \
                    + usable + setup
            if type(env) is Venv:
                if env.path != cache_dir() / "venvs" / env.spec_hash():
                    return (lead + f"the tool's Venv lives at a path of its own ({env.path}), which execbox "
                            "does not install into. " + usable + "use Venv(packages=[...]) without path= "
                            "(execbox's cache), or preinstall them there.")
                return None
        return lead + f"the {executor.name} backend's environment is not a Venv or DockerPython. " + usable + setup

    def _grown(self, missing: list[str]) -> Environment:
        """The executor's environment with ``missing`` added."""
        env = getattr(self._executor, "environment")
        if isinstance(env, Venv):
            return Venv(python=env.python, packages=(*env.packages, *missing), requirements=env.requirements,
                        installer=env.installer)
        assert isinstance(env, DockerPython)
        common: dict[str, Any] = dict(volumes=env.volumes, cleanup_container=env.cleanup_container,
                                      keep_container_running=env.keep_container_running)
        if env.dockerfile is not None:  # a Dockerfile's image takes no packages: build on top of it
            return DockerPython(env.build(), pip_packages=missing, **common)
        return DockerPython(env.image, pip_packages=(*env.pip_packages, *missing),
                            requirements_file=env.requirements_file, **common)

    # -- lifecycle -------------------------------------------------------------

    def close(self) -> None:
        """Close the executor if the tool built it (a given one is the caller's)."""
        if self._owns_executor:
            self._executor.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def __enter__(self) -> PythonTool:
        self._executor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> PythonTool:
        await asyncio.to_thread(self._executor.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _build(backend: str | None, environment: Environment | None, workspace: Any,
           timeout: float | None) -> Executor:
    if isinstance(environment, DockerPython):
        if backend not in (None, "docker"):
            raise ConfigurationError(f"PythonTool(backend={backend!r}, environment=DockerPython(...)): a "
                                     "DockerPython runs on the docker backend: use backend='docker' or leave it out")
        backend = "docker"
    options: dict[str, Any] = {"workspace": workspace,
                               "limits": Limits(timeout_s=DEFAULT_TIMEOUT_S if timeout is None else timeout)}
    if environment is not None:
        options["environment"] = environment
    return create_executor(backend, **options)


class _Gate:
    """Many runs at once, or one environment switch (which waits for the
    runs in flight and holds new ones back)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._runs = 0
        self._switching = False

    def enter(self, *, wait: bool = True) -> bool:
        with self._cond:
            if self._switching and not wait:
                return False
            self._cond.wait_for(lambda: not self._switching)
            self._runs += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._runs -= 1
            self._cond.notify_all()

    @contextmanager
    def running(self) -> Iterator[None]:
        self.enter()
        try:
            yield
        finally:
            self.leave()

    @contextmanager
    def switching(self) -> Iterator[None]:
        with self._cond:
            self._cond.wait_for(lambda: not self._switching)
            self._switching = True
            self._cond.wait_for(lambda: self._runs == 0)
        try:
            yield
        finally:
            with self._cond:
                self._switching = False
                self._cond.notify_all()


def _failure(error: str) -> dict[str, Any]:
    return {"success": False, "stdout": "", "stderr": "", "error": error, "files": []}


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments as a dict with ``code`` (raises ``_Rejected``)."""
    if isinstance(arguments, (str, bytes, bytearray)):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise _Rejected(f"InvalidArguments: the arguments are not valid JSON ({exc}): send a JSON object "
                            f"such as {_EXAMPLE}") from None
    if not isinstance(arguments, Mapping):
        raise _Rejected(f"InvalidArguments: the arguments must be a JSON object such as {_EXAMPLE}, not "
                        f"{_json_type(arguments)}")
    unknown = sorted(str(k) for k in arguments if k not in _ARGUMENTS)
    if unknown:
        raise _Rejected(f"InvalidArguments: unknown argument{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(repr(k) for k in unknown)}: this tool takes 'code' (required) and "
                        "'libraries' (optional)")
    if "code" not in arguments:
        raise _Rejected(f"InvalidArguments: 'code' is missing: send the Python code to run, as in {_EXAMPLE}")
    return dict(arguments)


def _checked(code: Any, libraries: Any) -> tuple[str, tuple[str, ...]]:
    """The code and the canonical requirement strings (raises ``_Rejected``)."""
    if not isinstance(code, str):
        raise _Rejected(f"InvalidArguments: 'code' must be a string of Python code, not {_json_type(code)}")
    if not code.strip():
        raise _Rejected("InvalidArguments: 'code' is empty: send the Python code to run")
    if libraries is None:
        return code, ()
    if isinstance(libraries, (str, bytes)) or not isinstance(libraries, (list, tuple)):
        raise _Rejected("InvalidArguments: 'libraries' must be an array of package names such as "
                        f'["numpy", "pandas>=2"], not {_json_type(libraries)}')
    wanted: dict[str, str] = {}
    for item in libraries:
        found = _REQUIREMENT.match(item) if isinstance(item, str) else None
        if found is None:
            raise _Rejected(f"InvalidArguments: {item!r} in 'libraries' is not a PyPI requirement: use a name "
                            "with optional [extras] and version such as 'numpy' or 'pandas>=2' (no URLs, "
                            "paths, markers or pip options)")
        requirement = re.sub(r"\s+", "", item)
        wanted.setdefault(_key(requirement), requirement)
    return code, tuple(wanted.values())


def _key(requirement: str) -> str:
    """Compare requirements the way PyPI compares names (PEP 503)."""
    found = _REQUIREMENT.match(requirement)
    assert found is not None
    name = re.sub(r"[-_.]+", "-", found["name"]).lower()
    return name + re.sub(r"\s+", "", requirement[found.end("name"):]).lower()


def _json_type(value: Any) -> str:
    kinds = {type(None): "null", bool: "a boolean", int: "a number", float: "a number", str: "a string"}
    return kinds.get(type(value)) or ("an array" if isinstance(value, (list, tuple)) else
                                      "an object" if isinstance(value, Mapping) else type(value).__name__)
