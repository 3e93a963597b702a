"""The docker backend: one long-lived, hardened container per executor,
through the Docker SDK against a real engine. Where the image has python3,
the container's command is execbox's agent (``_agent/agent.py``, bound in
read-only) and blocks go to it over the container's attached stream
(``_link``): ~65 ms a block as a ``docker exec`` became a few ms. An image
without python3 gets the keep-alive and a ``docker exec`` per block
(``_exec``), with the same guarantees.

The workspace is bind-mounted at /workspace. By default the container has
no network, memory/pids limits (CPU when asked), a read-only root with a
tmpfs /tmp, a non-root user, no capabilities and no-new-privileges. A
timeout kills everything the block started inside the container; the
container is killed before the workspace is touched on ``close()``.

``Limits(network=True)`` is the internet, not this machine, as on the
sandbox: Docker's default bridge (whose gateway is the host, which routes
the rest: its other addresses, its private networks, the cloud metadata
endpoint), narrowed by routing rules in the container's own network
namespace that the agent installs before any block runs
(``_agent/egress.py``; the rules are the sandbox's, ``execbox/_netlink.py``,
with this host's addresses read at each start): the host, link-local, the
private ranges and IPv6 unreachable, DNS to the container's nameservers on
port 53 alone. The agent holds CAP_NET_ADMIN for that and drops it; no block
holds it. Where they cannot be installed (no agent: an image without
python3; gVisor, whose netstack has no routing rules) the container does not
start with the network on (``_network_refused``): never the bridge as it is.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..._docker_engine import docker_client, kill_container
from ..._errors import ConfigurationError
from ..._gpus import parse_gpus
from ..._languages import LANGUAGES, PYTHON, Language, Policy
from ..._models import Limits
from ..._progress import OnProgress, Progress, check_on_progress, reporting
from ..._workspace import INTERNAL_DIR, Workspace
from ...environments import Environment
from ...environments._docker import DockerPython, with_pip_packages
from .._base import Executor
from .._executor_api import Capabilities
from .._process import Cancellation, OutputCallback, ProcessOutcome
from .._result import Outcome
from . import _container as container_kit  # noqa: F401 (the Docker-hosted Jupyter server's too)
from ._attempts import BlockAttempts
from ._container import (
    WORKDIR,
    container_user,
    hand_over,
    normalize_volumes,
    reap_orphans,
    track,
)
from ._link import AgentLink
from ._starting import ContainerStart

__all__ = ["DockerExecutor"]

# a block's stdin, written by the host where the container sees it read-only (.execbox/)
STDIN_DIR = f"{INTERNAL_DIR}/stdin"


class DockerExecutor(ContainerStart, BlockAttempts, Executor):
    """Run blocks in a Docker container kept running for the executor's life.

    - ``image`` (or ``environment=DockerPython(...)``): what to run; default
      execbox's base image (Debian + Python), built locally when missing.
    - ``runtime``: an engine runtime such as ``"runsc"`` (gVisor).
    - ``env``: variables for every block; ``pass_env``: names of host
      variables to pass through (a missing one is warned about).
    - ``volumes``: extra mounts; ``gpus``: "all", an index, a UUID or a
      list (``execbox._gpus``), asked of the engine's NVIDIA runtime as
      ``device_requests`` (``docker.types.DeviceRequest``, AutoGen's
      spelling, taken as well).
    - ``auto_remove``: remove the container once stopped (default);
      ``stop_container=False`` leaves it running after ``close()``.
    - ``user``: who blocks run as (default: the host user, or nobody when
      the host user is root).
    - ``container_create_kwargs``: passed to the SDK's ``containers.create``
      on top of execbox's settings (a warning names each one replaced).
    - ``keep_code_files`` (True): False removes a block's code file once it
      has run (a named block's file is kept).
    - ``on_progress``: gets the steps of the start (the image built, the
      container started): a callable taking each step's text; default: a
      spinner on a terminal, ``execbox`` log lines otherwise; False: nothing.
    """

    name = "docker"
    compiles = True  # where the image has the toolchain (execbox images build --languages)
    takes_stdin = True  # a file of the host's in the read-only .execbox/ (STDIN_DIR)

    def __init__(
        self,
        *,
        image: str | None = None,
        environment: DockerPython | None = None,
        runtime: str | None = None,
        env: Mapping[str, str] | None = None,
        pass_env: Sequence[str] = (),
        volumes: Mapping[str, Any] | Iterable[str] | None = None,
        device_requests: Sequence[Any] | None = None,
        gpus: Any = None,
        auto_remove: bool | None = None,
        stop_container: bool | None = None,
        container_name: str | None = None,
        user: str | None = None,
        container_create_kwargs: Mapping[str, Any] | None = None,
        tmp_size_mb: int = 256,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        silence_pip: bool = True,
        keep_code_files: bool = True,
        on_progress: OnProgress = None,
    ) -> None:
        if environment is not None:
            self._checked_environment(environment)
        if environment is not None and image is not None:
            raise ConfigurationError(
                "DockerExecutor: give image= or environment=DockerPython(image=...), not both"
            )
        for key, value in (env or {}).items():
            if not isinstance(key, str) or not isinstance(value, str):
                raise ConfigurationError(f"env maps str to str; got {key!r}: {value!r}")
        if isinstance(pass_env, str):
            raise ConfigurationError("pass_env takes a list of variable names, not one string")
        if not (isinstance(tmp_size_mb, int) and tmp_size_mb > 0):
            raise ConfigurationError(f"tmp_size_mb must be a positive whole number, got {tmp_size_mb!r}")
        super().__init__(
            workspace=workspace,
            limits=limits,
            execution_policies=execution_policies,
            silence_pip=silence_pip,
            keep_code_files=keep_code_files,
        )
        self._environment = environment or DockerPython(image)
        self.runtime = runtime
        self.env = dict(env or {})
        self.pass_env = tuple(pass_env)
        self.volumes = normalize_volumes(volumes if volumes is not None else self.environment.volumes)
        self.gpus = parse_gpus(gpus)
        if self.gpus is not None and device_requests:
            raise ConfigurationError("DockerExecutor: give gpus= or device_requests=, not both")
        self.device_requests = list(device_requests or [])
        self.auto_remove = self.environment.cleanup_container if auto_remove is None else auto_remove
        self.stop_container = (
            (not self.environment.keep_container_running) if stop_container is None else stop_container
        )
        self.container_name = container_name
        self.user = user or container_user()
        self.container_create_kwargs = dict(container_create_kwargs or {})
        self.tmp_size_mb = tmp_size_mb
        self._progress = check_on_progress(on_progress, "DockerExecutor")
        self._client: Any = None
        self._container_id: str | None = None
        self._link: AgentLink | None = None  # the agent of the container _container_id, if it has one
        self._image: str | None = None
        self._oom_seen = 0
        self._container_lock = threading.Lock()
        self._live_tokens: set[str] = set()  # of the blocks running now

    _environment: DockerPython

    @property
    def environment(self) -> DockerPython:
        """The image blocks run in."""
        return self._environment

    def _checked_environment(self, environment: Environment) -> DockerPython:
        if not isinstance(environment, DockerPython):
            raise ConfigurationError(
                f"DockerExecutor(environment=...) takes a DockerPython, not {type(environment).__name__} "
                "(a Venv or SystemPython lives on this machine: use the local or sandbox backend)"
            )
        return environment

    def can_add_libraries(self) -> str | None:
        return None  # a derived image: pip install on top of this one

    def _with_libraries(self, packages: tuple[str, ...], progress: Progress) -> DockerPython:
        grown = with_pip_packages(self.environment, packages, progress)
        grown.build(progress)
        return grown

    @property
    def container_id(self) -> str | None:
        """The running container's id (None before ``start()``)."""
        return self._container_id

    @property
    def capabilities(self) -> Capabilities:
        found = self._found_programs()
        languages = tuple(
            lang.name
            for lang in LANGUAGES
            if lang.installed(lambda p: ("python3" if p == PYTHON else p) in found) is not None
        )
        return Capabilities(
            backend=self.name,
            isolated=True,
            stateful=False,
            enforced=frozenset(
                {"timeout_s", "max_output_bytes", "memory_mb", "max_processes", "cpus", "network"}
            ),
            languages=languages,
        )

    # -- lifecycle --------------------------------------------------------------

    def _start(self) -> None:
        self._client = docker_client()
        reap_orphans(self._client)
        with reporting(self._progress) as progress:
            self._image = self.environment.build(progress)
            progress(f"starting a container of {self._image}")
            self._start_container()
        track(self)

    # -- compiled languages (_build): the compiler runs in the container ----------

    def _build_root(self) -> str:
        return WORKDIR

    def _toolchain_version(self, language: Language) -> str:
        return self._image or ""  # the image holds the toolchain: a new image, new builds

    def _give_build(self, folders: tuple[str, ...]) -> None:
        hand_over(str(self.workspace.path), self.user, list(folders))

    def _compile(
        self, argv: list[str], *, folders: tuple[str, ...], env: dict[str, str], cancel: Cancellation
    ) -> ProcessOutcome:
        outcome, _, _ = self._attempts(
            argv, None, cancel, None, None, env=env, timeout_s=self.limits.compile_timeout_s
        )
        return outcome

    def _run_program(
        self,
        language: Language,
        argv: list[str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome:
        with self._stdin_file(stdin) as path:
            return self._execute_argv(language, argv, None, cancel, on_output, path)

    @contextlib.contextmanager
    def _stdin_file(self, stdin: str | None) -> Iterator[str | None]:
        """A block's stdin as a file of execbox's, written by the host (never
        following a link), read-only in the container: its path there while
        the block runs, removed after (None: no stdin)."""
        if stdin is None:
            yield None
            return
        given = f"{STDIN_DIR}/{secrets.token_hex(8)}"
        self.workspace.write_internal(given, stdin.encode("utf-8", "surrogateescape"))
        try:
            yield f"{WORKDIR}/{given}"
        finally:
            self.workspace.remove_internal(given)

    def _stop(self) -> None:
        container_id, self._container_id = self._container_id, None
        link, self._link = self._link, None
        if link is not None:
            link.close()
        if container_id is None or not self.stop_container:
            return
        self._kill_container(container_id)

    def _kill_container(self, container_id: str) -> None:
        """Kill the container and wait until it no longer runs (gone
        already is fine; an engine that will not: a warning)."""
        kill_container(self._client, container_id)

    def give_to_blocks(self, paths: Iterable[str]) -> None:
        hand_over(str(self.workspace.path), self.user, [os.path.normpath(p) for p in paths])

    # -- running ----------------------------------------------------------------

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
        with self._stdin_file(stdin) as path:
            return self._execute(language, code_path, cancel, on_output, path)

    def _execute(
        self,
        language: Language,
        code_path: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None = None,
    ) -> Outcome:
        assert language.command is not None
        program = "python3" if language.command[0] == PYTHON else language.command[0]
        argv = [program, *language.command[1:], code_path]
        # the agent's interpreter runs as `python3 -u`: a Python file runs in it
        in_agent = code_path if language.command == (PYTHON, "-u") else None
        hand_over(str(self.workspace.path), self.user, [os.path.normpath(code_path)])
        return self._execute_argv(language, argv, in_agent, cancel, on_output, stdin_path)
