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
import functools
import os
import re
import secrets
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ..._docker_engine import docker_client, engine_errors, ensure_image, is_gone, kill_container
from ..._errors import (
    BackendUnavailableError,
    ConfigurationError,
    ImageMissingError,
    StallError,
    WorkspaceError,
)
from ..._gpus import parse_gpus
from ..._languages import LANGUAGES, PYTHON, Language, Policy
from ..._models import DEFAULT_FILE_SIZE_MB, DEFAULT_OPEN_FILES, ErrorInfo, Limits
from ..._netlink import host_addresses
from ..._nofollow import open_folders
from ..._progress import OnProgress, Progress, check_on_progress, reporting
from ..._workspace import INTERNAL_DIR, Workspace
from ...environments import Environment
from ...environments._docker import DockerPython, with_pip_packages
from .._base import Executor
from .._executor_api import Capabilities
from .._process import Cancellation, OutputCallback, ProcessOutcome
from .._result import Outcome, outcome_to_result
from . import _container as container_kit  # noqa: F401 (the Docker-hosted Jupyter server's too)
from ._container import (
    WORKDIR,
    WRITABLE_INTERNAL,
    container_settings,
    container_user,
    gpu_requests,
    hand_over,
    merge_overrides,
    normalize_volumes,
    reap_orphans,
    track,
)
from ._exec import ContainerGone, exec_output, kill_leftovers, memory_kills, run_exec
from ._link import AgentLink, AgentOutcome, AgentStalled, NoAgent, run_block

__all__ = ["DockerExecutor"]

# a block's stdin, written by the host where the container sees it read-only (.execbox/)
STDIN_DIR = f"{INTERNAL_DIR}/stdin"

# What a block's environment always has in the container.
BASE_ENV = {
    "HOME": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONUNBUFFERED": "1",
    "PYTHONIOENCODING": "utf-8",
    "MPLBACKEND": "Agg",
    "PYTHONDONTWRITEBYTECODE": "1",
    # /tmp is emptied after each block: matplotlib's font cache lives on
    "MPLCONFIGDIR": f"{WORKDIR}/.execbox/matplotlib",
}
# (image, PATH, volumes) -> programs found in such a container (one probe each per process)
_programs: dict[tuple[str, str, str], frozenset[str]] = {}
# images whose python3 could not run the agent (blocks run as docker exec)
_agentless: set[tuple[str, ...]] = set()  # by DockerExecutor._agent_key
_PROBE = (
    "for p in python3 bash sh node pwsh gcc g++ go rustc javac java tsc esbuild gdc mcs mono ruby php "
    "lua perl Rscript; "
    "do command -v $p >/dev/null 2>&1 && echo $p; done; true"
)


class DockerExecutor(Executor):
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
        found = _programs.get(self._programs_key(self._image or ""), frozenset({"python3", "sh", "bash"}))
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

    def _start_container(self) -> None:
        if self._link is not None:  # the last container's, dead or killed: its socket goes now
            self._link.close()
            self._link = None
        self._make_matplotlib_folder()
        agent = self._agent_key() not in _agentless
        if not agent and self.limits.network:
            raise self._network_refused("the image's python3 cannot run execbox's agent (seen before)")
        settings = merge_overrides(self._settings(agent), self.container_create_kwargs)
        shared = str(settings.get("network_mode", ""))
        if self.limits.network and (shared == "host" or shared.startswith("container:")):
            # the rules go in the container's network namespace: here, the host's or another container's
            raise ConfigurationError(
                f"Limits(network=True) with container_create_kwargs network_mode={shared!r}: the container's "
                "routing rules would be installed in a namespace it shares, and the host would be reachable; "
                "leave network_mode to execbox (or give a network of the engine's by name)"
            )
        volumes = settings.get("volumes")
        sealed = (
            isinstance(volumes, Mapping)
            and volumes.get(os.path.join(str(self.workspace.path), INTERNAL_DIR), {}).get("mode") == "ro"
        )
        # runs walk for set-ID bits only what blocks can write in .execbox/ (all of it, where
        # container_create_kwargs replaced our volumes)
        self._blocks_write_internal = WRITABLE_INTERNAL if sealed else True
        try:
            container = self._run_container(settings)
        except ImageMissingError:
            ensure_image(self._client, settings["image"])  # pulls it, or raises the "build it" error
            container = self._run_container(settings)
        link = None
        if agent:
            try:
                link = AgentLink(self._client, container.id)
                info = link.handshake()
            except (NoAgent, ContainerGone) as failed:
                if self.limits.network:  # no agent, no routing rules: never the host's network
                    self._kill_container(container.id)
                    said = "the image has no python3" if isinstance(failed, NoAgent) else str(failed)
                    raise self._network_refused(said) from None
                # no python3; or its python3 could not run the agent (too old?), or the agent refused to (it
                # could not keep blocks off its channel: the block user is root, container_create_kwargs
                # took its capabilities, no ctypes): by exec, in a new container, the block user's
                if isinstance(failed, ContainerGone):
                    warnings.warn(
                        f"execbox's agent did not start in image {self._image} ({failed}); its "
                        "blocks run as docker exec, ~60 ms slower each",
                        UserWarning,
                        stacklevel=4,
                    )
                _agentless.add(self._agent_key())
                self._kill_container(container.id)
                return self._start_container()
        self._container_id, self._link = container.id, link
        self._oom_seen = 0
        image_id = container.attrs["Image"]  # (container.image would ask the engine again)
        key = self._programs_key(image_id)
        if link is not None:
            _programs[key] = frozenset(info["programs"])
        elif key not in _programs:
            found = exec_output(self._client, container.id, ["/bin/sh", "-c", _PROBE])
            _programs[key] = frozenset(found.split())
        _programs[self._programs_key(self._image or "")] = _programs[key]

    def _network_refused(self, why: str) -> BackendUnavailableError:
        """Why the network on cannot be had (``_agent/egress.py``): never Docker's bridge as it is."""
        change = (
            "gVisor's network stack has no routing rules: use runtime runc (execbox's `docker` mode)"
            if self.runtime == "runsc"
            else "Use an image with python3 3.7 or later, and leave the container's user and capabilities "
            "to execbox (container_create_kwargs)"
        )
        return BackendUnavailableError(
            "docker",
            "Limits(network=True) needs execbox's agent in the container, which installs the routing rules "
            f"that keep blocks off this machine before any block runs; it could not ({why}). {change}, or "
            "set Limits(network=False)",
        )

    def _agent_key(self) -> tuple[str, ...]:
        """What an agent's start depends on besides the programs: who blocks
        run as, the runtime (its probe, blockuser.py) and the settings a
        caller put over execbox's."""
        return (
            *self._programs_key(self._image or ""),
            self.user,
            str(self.runtime),
            repr(self.container_create_kwargs),
        )

    def _programs_key(self, image: str) -> tuple[str, str, str]:
        """What the programs found in a container depend on: its image, its
        PATH and the volumes mounted in it (another executor on the same
        image may see other programs)."""
        return image, self.env.get("PATH", ""), repr(sorted(self.volumes.items()))

    def _settings(self, agent: bool) -> dict[str, Any]:
        env = {**BASE_ENV, **self._passed_env(), **self.env}
        return container_settings(
            image=self._image or "",
            workspace=str(self.workspace.path),
            limits=self.limits,
            memory_mb=self.limits.effective_memory_mb(),
            max_processes=self.limits.effective_max_processes(),
            user=self.user,
            env=env,
            volumes=self.volumes,
            tmp_size_mb=self.tmp_size_mb,
            open_files=DEFAULT_OPEN_FILES,
            file_size_mb=DEFAULT_FILE_SIZE_MB,
            runtime=self.runtime,
            device_requests=self.device_requests or gpu_requests(self.gpus),
            auto_remove=self.auto_remove,
            name=self.container_name,
            keep=not self.stop_container,
            agent=agent,
            host_addresses=self._host_addresses() if self.limits.network else (),
        )

    def _host_addresses(self) -> list[str]:
        """This host's own addresses, which the container's rules make unreachable (read at each start)."""
        try:
            return host_addresses()
        except OSError as exc:
            raise self._network_refused(f"this host's own addresses could not be read ({exc})") from None

    def _run_container(self, settings: dict[str, Any]) -> Any:
        with engine_errors(
            "the container could not be started",
            image=settings["image"],
            error=lambda text: BackendUnavailableError("docker", _explain_start(text, self.runtime)),
        ):
            return self._client.containers.run(**settings)

    def _make_matplotlib_folder(self) -> None:
        """The folders blocks write in .execbox/ (``WRITABLE_INTERNAL``:
        MPLCONFIGDIR, the builds), made and handed over by descriptor: a
        block may have left a link where .execbox or the folder belongs
        (then killed the container so that this runs again): the link is
        removed, never followed. Best effort: a block does without them."""
        for folder in WRITABLE_INTERNAL:
            parts = (INTERNAL_DIR, folder)
            try:
                os.close(open_folders(self.workspace.path, parts, "/".join(parts), create=True, repair=True))
            except (WorkspaceError, OSError):
                continue
            hand_over(str(self.workspace.path), self.user, [os.path.join(*parts)])

    # -- compiled languages (_build): the compiler runs in the container ----------

    def _build_root(self) -> str:
        return WORKDIR

    def _has_program(self, name: str) -> bool:
        found = _programs.get(self._programs_key(self._image or ""), frozenset({"python3", "sh", "bash"}))
        return ("python3" if name == PYTHON else name) in found

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

    def _drop_container(self, container_id: str) -> None:
        """Kill the container, and start a new one for the next block (its
        agent did not answer: a block stopped or wedged it)."""
        self._kill_container(container_id)
        with self._container_lock:
            if self._container_id == container_id:
                self._container_id = None

    def _kill_container(self, container_id: str) -> None:
        """Kill the container and wait until it no longer runs (gone
        already is fine; an engine that will not: a warning)."""
        kill_container(self._client, container_id)

    def give_to_blocks(self, paths: Iterable[str]) -> None:
        hand_over(str(self.workspace.path), self.user, [os.path.normpath(p) for p in paths])

    def _passed_env(self) -> dict[str, str]:
        found = {name: os.environ[name] for name in self.pass_env if name in os.environ}
        missing = [name for name in self.pass_env if name not in os.environ]
        if missing:
            warnings.warn(
                f"pass_env: {', '.join(missing)} not set on this machine, so not passed to the "
                "container; set them or use env={...}",
                UserWarning,
                stacklevel=5,
            )
        return found

    # -- running ----------------------------------------------------------------

    def _execute_code(
        self,
        language: Language,
        code_path: str,
        code: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None = None,
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

    def _execute_argv(
        self,
        language: Language,
        argv: list[str],
        in_agent: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None = None,
    ) -> Outcome:
        outcome, container_id, note = self._attempts(argv, in_agent, cancel, on_output, stdin_path)
        result = outcome_to_result(language.name, outcome, self.limits)
        if isinstance(outcome, AgentOutcome) and outcome.malformed:
            result = self._container_died(
                container_id,
                result,
                (
                    f"{outcome.malformed}: its stream cannot be trusted, so the block's end is not "
                    "taken from it; the container was killed, and a new one starts with the next block"
                ),
            )
        elif outcome.exit_code == 137 and not outcome.timed_out and not outcome.cancelled:
            result = self._after_kill(language, outcome, result, container_id)
        if note:
            result.output = note + result.output
        return result

    def _attempts(
        self,
        argv: list[str],
        in_agent: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[Any, str, str]:
        """Run ``argv`` in the container, in a new one if it had stopped:
        (its outcome, the container's id, a note for the output)."""
        note = ""
        with self._container_lock:
            if self._container_id is None:
                self._start_container()
            container_id = self._container_id
        assert container_id is not None
        for attempt in (1, 2):
            try:
                outcome = self._run(
                    container_id, argv, in_agent, cancel, on_output, stdin_path, env=env, timeout_s=timeout_s
                )
            except ContainerGone as gone:
                if attempt == 2 and isinstance(gone, AgentStalled):
                    raise StallError(
                        f"docker: the agent of a new container did not answer either: {gone}",
                        waiting_for="the docker agent's answer",
                    ) from None
                if attempt == 2:
                    raise BackendUnavailableError(
                        "docker", f"a new container stopped at once too: {gone}"
                    ) from None
                note = (
                    f"Note: the container had stopped ({gone}); a new one was started for this block. "
                    "Files in /tmp and running processes were lost; the workspace was kept.\n"
                )
                container_id = self._replace_container(container_id)
                continue
            if attempt == 1 and _could_not_fork(outcome):
                # an earlier block's fork bomb outlived it and held every pid: it
                # is killed, and this block runs as if nothing had happened
                kill_leftovers(
                    self._client, container_id, functools.partial(self._kill_container, container_id)
                )
                if not self._running(container_id):
                    container_id = self._replace_container(container_id)
                continue
            break
        return outcome, container_id, note

    def _replace_container(self, gone_id: str) -> str:
        with self._container_lock:
            if self._container_id in (gone_id, None):
                if self._link is not None:
                    self._link.close()
                # (stopped, mostly; not where its agent's stream was found malformed between blocks)
                self._kill_container(gone_id)
                self._start_container()
            assert self._container_id is not None
            return self._container_id

    def _run(
        self,
        container_id: str,
        argv: list[str],
        python_file: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None = None,
        *,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        timeout_s = self.limits.timeout_s if timeout_s is None else timeout_s
        with self._container_lock:
            link = self._link if self._container_id == container_id else None
        if link is not None:
            return run_block(
                link,
                argv=argv,
                python_file=python_file,
                stdin_path=stdin_path,
                env=env,
                workdir=WORKDIR,
                timeout_s=timeout_s,
                output_limit=self.limits.max_output_bytes,
                cancel=cancel,
                on_output=on_output,
                kill_container=lambda: self._drop_container(container_id),
            )
        if stdin_path is not None:  # no agent in this image: the shell gives the program its stdin
            argv = ["sh", "-c", 'exec "$@" < "$0"', stdin_path, *argv]
        return run_exec(
            self._client,
            container_id,
            argv,
            env=env or {},
            workdir=WORKDIR,
            timeout_s=timeout_s,
            output_limit=self.limits.max_output_bytes,
            cancel=cancel,
            on_output=on_output,
            live_tokens=self._live_tokens,
            kill_container=lambda: self._kill_container(container_id),
        )

    def _after_kill(self, language: Language, outcome: Any, result: Outcome, container_id: str) -> Outcome:
        """A SIGKILLed block: the memory limit, or the container's death."""
        if isinstance(outcome, AgentOutcome) and outcome.agent_stalled:
            return self._container_died(
                container_id,
                result,
                (
                    "execbox's agent in the container stopped answering while the block ran (stopped from "
                    "outside?); the container was killed, and a new one starts with the next block"
                ),
            )
        if isinstance(outcome, AgentOutcome) and outcome.agent_died:
            self._kill_container(container_id)  # (it stops with its agent; one that did not, is stopped)
            return self._container_died(
                container_id,
                result,
                (
                    "execbox's agent in the container died while the block ran (the memory limit, "
                    "Limits.memory_mb, was hit, or it was killed from outside); a new container starts "
                    "with the next block"
                ),
            )
        if isinstance(outcome, AgentOutcome) and outcome.oom_kills is not None:
            kills: int | None = outcome.oom_kills
        else:
            kills = memory_kills(self._client, container_id)
        if kills is not None and kills > self._oom_seen:
            self._oom_seen = kills
            outcome.memory_exceeded_mb = self.limits.effective_memory_mb()
            return outcome_to_result(language.name, outcome, self.limits)
        if kills is None and not self._running(container_id):
            return self._container_died(
                container_id,
                result,
                (
                    "the container stopped while the block ran (killed from outside, or its init died); "
                    "a new container starts with the next block"
                ),
            )
        return result

    def _container_died(self, container_id: str, result: Outcome, note: str) -> Outcome:
        """The block's result when its container died under it: the next block starts a new one."""
        with self._container_lock:
            if self._container_id == container_id:
                self._container_id = None
        result.error = ErrorInfo("ContainerDied", note)
        result.output += note + ".\n"
        return result

    def _running(self, container_id: str) -> bool:
        """False once the container stops; a container being killed still
        shows as running for a moment, so wait a little for it to stop."""
        try:
            self._client.api.wait(container_id, timeout=0.5, condition="not-running")
        except Exception as exc:  # noqa: BLE001 - a read timeout: it still runs
            return not is_gone(exc)
        return False


def _could_not_fork(outcome: Any) -> bool:
    """The block's wrapper itself could not start the block."""
    return (
        outcome.exit_code == 2
        and re.fullmatch(r"execbox: \d+: Cannot fork\n", outcome.capture.combined.text()) is not None
    )


def _explain_start(text: str, runtime: str | None) -> str:
    if "device driver" in text and "gpu" in text.lower():
        return (
            f"the engine cannot give the container a GPU ({text}): install the NVIDIA driver and the "
            "NVIDIA Container Toolkit on the engine's host (nvidia-ctk runtime configure --runtime=docker), "
            "or drop gpus"
        )
    if runtime and "runtime" in text.lower():
        return (
            f"the engine has no runtime {runtime!r} ({text}): register it in the daemon's "
            "configuration (scripts/docker-engine.sh registers runsc), or leave runtime unset"
        )
    return f"the container could not be started: {text}"
