"""A Jupyter Kernel Gateway in a Docker container: ``DockerJupyterServer``.

The image is built locally (execbox's base plus ipykernel and
jupyter_kernel_gateway from a wheelhouse), or is the user's
(``custom_image_name``), which must meet the same contract:

- ``python3 -m kernel_gateway`` (or any Kernel Gateway) listens on port 8888
  of the container, started with ``--KernelGatewayApp.auth_token="$TOKEN"``,
  ``--JupyterApp.answer_yes=true`` and
  ``--JupyterWebsocketPersonality.list_kernels=true``;
- it honours the ``TOKEN`` environment variable;
- it can run as a non-root user with a read-only root and a writable /tmp
  (HOME, JUPYTER_RUNTIME_DIR and MPLCONFIGDIR point there).

Kernels get no network unless ``Limits(network=True)``: the container sits
alone on an internal Docker network (no route out) and is reached at its
address there, which only this host can reach. With network, the internet,
not this machine, as the Docker backend's: the container is on the default
bridge, and before the gateway starts an entry of execbox's
(``_docker_guard.py``, ``_gateway_entry.py``; it needs the image's python3
and runc: gVisor has no routing rules) installs the Docker backend's
routing rules in the container (this host's addresses, the bridge's gateway
among them, link-local, the private ranges and IPv6 unreachable; DNS to the
container's nameservers alone), then runs the image's command as the
non-root user with no capability at all; the host reaches the gateway
through the entry's relay, whose port is published on 127.0.0.1 only.
Either way a generated token guards it. The
executor talks to it with the gateway client (``shared_files=False``: the
container does not see the executor's workspace, so results come back as
messages and images are saved on this side).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from typing import Any, Self

from ..._docker_engine import docker_client, engine_errors, ensure_image
from ..._errors import BackendUnavailableError, ExecboxError
from ..._models import Limits
from ..._progress import OnProgress, Progress, check_on_progress, reporting
from ...images import ImageSpec, build_image
from ..docker import container_kit
from ._docker_guard import RELAY_PORT, await_guard, guarded, this_hosts_addresses
from ._gateway import JupyterConnectionInfo

__all__ = ["DockerJupyterServer", "jupyter_spec"]

PORT = 8888
START_TIMEOUT_S = 60.0
GATEWAY_PACKAGES = ("ipykernel", "jupyter_kernel_gateway")
GATEWAY_LINES = (
    "ENV HOME=/tmp JUPYTER_RUNTIME_DIR=/tmp/jupyter-runtime MPLCONFIGDIR=/tmp/matplotlib "
    "IPYTHONDIR=/tmp/ipython TOKEN=UNSET "
    # the gateway passes kernels only the variables named here
    "KG_ENV_PROCESS_WHITELIST=HOME,PATH,LANG,VIRTUAL_ENV,MPLCONFIGDIR,IPYTHONDIR,JUPYTER_RUNTIME_DIR",
    f"EXPOSE {PORT}",
    "WORKDIR /tmp",
    "CMD python3 -m kernel_gateway --KernelGatewayApp.ip=0.0.0.0 --KernelGatewayApp.port=8888 "
    '--KernelGatewayApp.auth_token="${TOKEN}" --JupyterApp.answer_yes=true '
    "--JupyterWebsocketPersonality.list_kernels=true",
)


def jupyter_spec(packages: Sequence[str] = (), base: str | None = None) -> ImageSpec:
    """The spec of the gateway image, with extra ``packages`` for kernels."""
    return ImageSpec(packages=(*GATEWAY_PACKAGES, *packages), base=base, lines=GATEWAY_LINES, kind="jupyter")


class DockerJupyterServer:
    """A Kernel Gateway in a hardened container, for ``JupyterExecutor(kernel=server)``.

    - ``custom_image_name``: a user image meeting the contract above
      (default: execbox's gateway image, built when missing, with
      ``packages`` added).
    - ``limits``: memory, processes, CPU and network of the whole container
      (network is off unless ``Limits(network=True)``: then the internet,
      not this machine, as the Docker backend's; refused, with
      ``BackendUnavailableError``, where the container's routing rules
      cannot be installed: gVisor, an image without python3; the published
      port works either way).
    - ``docker_env``: variables for the server and its kernels.
    - ``auto_remove`` / ``stop_container`` / ``container_name`` / ``runtime``
      as in ``DockerExecutor``.
    - ``on_progress``: gets the steps of ``start()`` (the image built, the
      container started, the gateway answering): a callable taking each
      step's text; default: a spinner on a terminal, ``execbox`` log lines
      otherwise; False: nothing.
    """

    def __init__(
        self,
        *,
        custom_image_name: str | None = None,
        packages: Sequence[str] = (),
        container_name: str | None = None,
        auto_remove: bool = True,
        stop_container: bool = True,
        docker_env: Mapping[str, str] | None = None,
        token: str | None = None,
        limits: Limits | None = None,
        runtime: str | None = None,
        on_progress: OnProgress = None,
    ) -> None:
        self.custom_image_name = custom_image_name
        self.packages = tuple(packages)
        self.container_name = container_name
        self.auto_remove = auto_remove
        self.stop_container = stop_container
        self.docker_env = dict(docker_env or {})
        self.token = token or secrets.token_hex(24)
        self.limits = limits or Limits()
        self.runtime = runtime
        self._progress = check_on_progress(on_progress, "DockerJupyterServer")
        self._container: Any = None
        self._network: Any = None
        self.host = "127.0.0.1"
        self.port: int | None = None

    def __repr__(self) -> str:
        return f"DockerJupyterServer(image={self.custom_image_name or 'execbox/jupyter'!r}, port={self.port})"

    @property
    def connection_info(self) -> JupyterConnectionInfo:
        if self._container is None:
            self.start()
        assert self.port is not None
        return JupyterConnectionInfo(self.host, self.port, token=self.token, shared_files=False)

    @property
    def container_id(self) -> str | None:
        return None if self._container is None else self._container.id

    def start(self) -> Self:
        if self._container is not None:
            return self
        with reporting(self._progress) as progress:
            self._start(progress)
        return self

    def _start(self, progress: Progress) -> None:
        client = docker_client()
        container_kit.reap_orphans(client)
        if self.custom_image_name:
            progress(f"getting the image {self.custom_image_name}")
            ensure_image(client, self.custom_image_name)
            image = self.custom_image_name
        else:
            image = build_image(jupyter_spec(self.packages), on_progress=progress)
        progress(f"starting the Jupyter container of {image}")
        settings = container_kit.confined(
            image=image,
            user=container_kit.NOBODY,
            memory_mb=self.limits.effective_memory_mb(),
            pids=self.limits.effective_max_processes() + 64,
            cpus=self.limits.cpus,
            tmp_size_mb=256,
            auto_remove=self.auto_remove,
            runtime=self.runtime,
            name=self.container_name,
            labels={},
        )
        settings["environment"] = {**self.docker_env, "TOKEN": self.token}
        try:
            with engine_errors("the Jupyter container could not start"):
                if self.limits.network:  # the default bridge, narrowed; the port published on loopback only
                    settings = guarded(
                        settings,
                        client.api.inspect_image(image)["Config"],
                        user=container_kit.NOBODY,
                        addresses=this_hosts_addresses(self.runtime),
                        gateway_port=PORT,
                    )
                else:  # a network of its own with no way out; reached at its address
                    self._network = client.networks.create(
                        f"execbox-jupyter-{secrets.token_hex(6)}",
                        driver="bridge",
                        internal=True,
                        labels={container_kit.LABEL_OWNER: container_kit.owner_label()},
                    )
                    settings["network"] = self._network.name
                self._container = client.containers.run(**settings)
                self._container.reload()
                if self.limits.network:
                    progress("installing the container's routing rules")
                    await_guard(self._container, self.runtime)  # running then: its port is published
                    self.host, self.port = (
                        "127.0.0.1",
                        int(self._container.ports[f"{RELAY_PORT}/tcp"][0]["HostPort"]),
                    )
                else:
                    networks = self._container.attrs["NetworkSettings"]["Networks"]
                    self.host, self.port = networks[self._network.name]["IPAddress"], PORT
        except BackendUnavailableError:
            self.stop()  # what was made (the network) goes
            raise
        container_kit.track(self)
        progress("waiting for the Kernel Gateway to answer")
        self._wait_ready()

    def _wait_ready(self) -> None:
        info = JupyterConnectionInfo(self.host, self.port or 0, token=self.token)
        end = time.monotonic() + START_TIMEOUT_S
        last = ""
        while time.monotonic() < end:
            try:
                self._container.reload()
            except Exception:  # noqa: BLE001 - removed once it exited (auto_remove)
                break
            if self._container.status not in ("created", "running"):
                break
            try:
                info.request("GET", "/api/kernelspecs", timeout=2)
                return
            except ExecboxError as exc:
                last = str(exc)
                time.sleep(0.1)
        logs = self._logs()
        self.stop()
        raise BackendUnavailableError(
            "docker",
            f"the Kernel Gateway in the container did not answer ({last or 'it exited'}); does the "
            f"image meet DockerJupyterServer's contract (kernel gateway on port {PORT}, TOKEN)? "
            f"Its log:\n{logs}",
        )

    def _logs(self) -> str:
        if self._container is None:
            return "(no log)"
        try:
            return self._container.logs(tail=20).decode("utf-8", "replace").strip()
        except Exception:  # noqa: BLE001 - the container may be gone
            return "(no log: the container is gone)"

    def stop(self) -> None:
        """Stop the container (and so every kernel in it)."""
        container, self._container = self._container, None
        network, self._network = self._network, None
        if container is not None and not self.stop_container:
            return
        if container is not None:
            try:
                container.kill()
                container.wait(condition="removed" if self.auto_remove else "not-running", timeout=30)
            except Exception:  # noqa: BLE001 - gone already is fine
                pass
        if network is not None:  # also when the container never started: the network was made first
            try:
                if container is not None and not self.auto_remove:
                    container.remove(force=True)
                network.remove()
            except Exception:  # noqa: BLE001 - removed by the orphan reaper at worst
                pass

    close = stop

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
