"""How a ``DockerExecutor``'s container starts (``ContainerStart``, the part
of the executor that does it): execbox's settings with ``container_create_kwargs``
over them, the agent's handshake or, where the image's python3 cannot run
the agent, blocks by ``docker exec``; the programs found in the container
(which languages run, which compilers build); and the network on refused
where the agent cannot install its routing rules (``_network_refused``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..._docker_engine import engine_errors, ensure_image
from ..._errors import (
    BackendUnavailableError,
    ConfigurationError,
    ImageMissingError,
    WorkspaceError,
)
from ..._languages import PYTHON
from ..._models import DEFAULT_FILE_SIZE_MB, DEFAULT_OPEN_FILES, Limits
from ..._netlink import host_addresses
from ..._nofollow import open_folders
from ..._workspace import INTERNAL_DIR, Workspace
from ._container import (
    WORKDIR,
    WRITABLE_INTERNAL,
    container_settings,
    gpu_requests,
    hand_over,
    merge_overrides,
)
from ._exec import ContainerGone, exec_output
from ._link import AgentLink, NoAgent

__all__ = ["BASE_ENV", "ContainerStart"]

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


class ContainerStart:
    """The container's start, a part of ``DockerExecutor`` (which sets these
    attributes in its ``__init__``)."""

    workspace: Workspace
    limits: Limits
    runtime: str | None
    env: dict[str, str]
    pass_env: tuple[str, ...]
    volumes: dict[str, Any]
    gpus: Any
    device_requests: list[Any]
    auto_remove: bool
    stop_container: bool
    container_name: str | None
    user: str
    container_create_kwargs: dict[str, Any]
    tmp_size_mb: int
    _client: Any
    _container_id: str | None
    _link: AgentLink | None
    _image: str | None
    _oom_seen: int
    _blocks_write_internal: bool | Sequence[str]

    if TYPE_CHECKING:

        def _kill_container(self, container_id: str) -> None: ...

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

    def _has_program(self, name: str) -> bool:
        return ("python3" if name == PYTHON else name) in self._found_programs()

    def _found_programs(self) -> frozenset[str]:
        """The programs found in a container of this executor's image (a guess before the first start)."""
        return _programs.get(self._programs_key(self._image or ""), frozenset({"python3", "sh", "bash"}))


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
