"""Where execbox meets the Docker engine: one client per address, and the
engine's failures translated into execbox errors that say what to do.

Everything that talks to Docker (the docker backend, image builds, the
Docker-hosted Jupyter server, papers) gets its client here, and this is the
one module that knows the Docker SDK's exceptions: the others wrap their
calls in ``engine_errors`` (as httpx maps httpcore's), so that

- an engine that does not answer (no socket, a refused or dropped
  connection) is a ``BackendUnavailableError`` naming DOCKER_HOST;
- a missing image is an ``ImageMissingError`` (when the call names one);
- a container (or exec) that is gone or no longer running is what the
  caller makes of it (``gone=``: start a new container, nothing to stop);
- any other refusal is the caller's error (a ``BackendUnavailableError``
  by default) with what was being done and the engine's explanation.

``kill_container`` stops a container whatever state it is in, and warns,
rather than raises, when the engine will not: it runs in ``close()``.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ._errors import (
    BackendUnavailableError,
    ConfigurationError,
    ExecboxError,
    ImageMissingError,
    install_hint,
)

__all__ = [
    "docker_client",
    "engine_address",
    "engine_errors",
    "ensure_image",
    "image_exists",
    "is_gone",
    "kill_container",
    "unreachable",
]

_clients: dict[str, Any] = {}
_lock = threading.Lock()
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


def engine_address() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def docker_client() -> Any:
    """A client of the engine at DOCKER_HOST (or the default socket), shared
    per address. Raises BackendUnavailableError when the SDK is missing or
    the engine does not answer."""
    address = engine_address()
    with _lock:
        client = _clients.get(address)
        if client is not None:
            return client
        try:
            import docker
        except ImportError:
            raise BackendUnavailableError(
                "docker", f"the Docker SDK is not installed: {install_hint('docker')}"
            ) from None
        try:
            client = docker.DockerClient(base_url=address, version="auto", timeout=120)
        except docker.errors.DockerException as exc:
            raise unreachable(address, exc) from None
        _clients[address] = client
        return client


def unreachable(address: str, exc: BaseException) -> BackendUnavailableError:
    return BackendUnavailableError(
        "docker",
        f"Docker is not reachable at {address} ({_short(exc)}): start the daemon (`make docker`, "
        "or scripts/docker-engine.sh), set DOCKER_HOST to where it listens, or use backend='sandbox'",
    )


@contextmanager
def engine_errors(
    doing: str,
    *,
    image: str | None = None,
    gone: Callable[[str], Exception] | None = None,
    error: Callable[[str], ExecboxError] | None = None,
) -> Iterator[None]:
    """Run Docker SDK calls; their failures leave as execbox's (module
    docstring). ``doing``: what the calls were for, to start the message;
    ``image``: the image they use (its absence: ``ImageMissingError``);
    ``gone``: made from the engine's words when the container or exec is
    gone or not running; ``error``: made from them for any other refusal."""
    try:
        yield
    except ExecboxError:
        raise
    except Exception as exc:
        import docker

        if not _from_engine(exc):
            raise
        text = _short(exc)
        if not isinstance(exc, docker.errors.APIError):
            raise unreachable(engine_address(), exc) from None
        if image is not None and isinstance(exc, docker.errors.ImageNotFound):
            raise ImageMissingError(image, text) from None
        if gone is not None and is_gone(exc):
            raise gone(text) from None
        raise (
            error(text) if error is not None else BackendUnavailableError("docker", f"{doing}: {text}")
        ) from None


def is_gone(exc: BaseException) -> bool:
    """The engine said that what a call named (a container, an exec, an
    image) is not there (404), or not running (409)."""
    import docker

    if not isinstance(exc, docker.errors.APIError):
        return False
    text = str(exc.explanation or exc)
    return (
        isinstance(exc, docker.errors.NotFound)
        or exc.status_code == 409
        or "is not running" in text
        or "No such container" in text
    )


def kill_container(client: Any, container_id: str, wait_s: float = 30.0) -> None:
    """Kill a container and wait until it no longer runs. Gone or stopped
    already is done; an engine that refuses, or does not answer, is a
    warning that names the container to remove: this runs in ``close()``,
    which must finish (the workspace, the other resources) all the same."""
    try:
        client.api.kill(container_id)
    except Exception as exc:
        if not _from_engine(exc):
            raise
        if not is_gone(exc):
            warnings.warn(
                f"docker: container {container_id[:12]} could not be killed ({_short(exc)}); it may "
                f"still run: remove it with `docker rm -f {container_id[:12]}`",
                UserWarning,
                stacklevel=2,
            )
        return
    try:
        client.api.wait(container_id, timeout=wait_s, condition="not-running")
    except Exception:  # noqa: BLE001 - killed: the wait may race its removal (auto_remove)
        pass


def _from_engine(exc: BaseException) -> bool:
    """An exception of the Docker SDK, or of the HTTP client under it (a
    refused or dropped connection, a read timeout)."""
    import docker
    import requests

    return isinstance(exc, (docker.errors.DockerException, requests.exceptions.RequestException))


def image_exists(client: Any, image: str) -> bool:
    import docker

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(client: Any, image: str) -> None:
    """Make sure ``image`` is in the engine's store: pull it if it is not
    (which fails without a registry, and then says how to build it)."""
    import docker

    if not isinstance(image, str) or not image.strip():
        raise ConfigurationError(f"image must be an image name such as 'execbox/base:latest', got {image!r}")
    if image_exists(client, image):
        return
    try:
        client.images.pull(image)
    except docker.errors.DockerException as exc:
        raise ImageMissingError(image, _short(exc)) from None
    except Exception as exc:  # the engine dropped the connection
        if not _from_engine(exc):
            raise
        raise unreachable(engine_address(), exc) from None


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
