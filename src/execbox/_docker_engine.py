"""Where execbox meets the Docker engine: one client per address, and the
engine's failures translated into execbox errors that say what to do.

Everything that talks to Docker (the docker backend, image builds, the
Docker-hosted Jupyter server) gets its client here.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from ._errors import BackendUnavailableError, ConfigurationError

__all__ = [
    "ImageMissingError",
    "docker_client",
    "engine_address",
    "ensure_image",
    "image_exists",
]

_clients: dict[str, Any] = {}
_lock = threading.Lock()
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


class ImageMissingError(BackendUnavailableError):
    """An image is not in the engine's store and could not be pulled."""

    def __init__(self, image: str, detail: str) -> None:
        self.image = image
        BackendUnavailableError.__init__(
            self, "docker",
            f"image {image!r} is not available locally and could not be pulled ({detail}): build it "
            "with `execbox images build` (the base image, or --package/--requirements/--dockerfile for "
            "one with your packages) and pass the tag it prints",
        )


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
            import docker  # type: ignore[import-untyped]
        except ImportError:
            raise BackendUnavailableError(
                "docker", "the Docker SDK is not installed: pip install 'execbox[docker]'"
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


def image_exists(client: Any, image: str) -> bool:
    import docker  # type: ignore[import-untyped]

    try:
        client.images.get(image)
    except docker.errors.ImageNotFound:
        return False
    return True


def ensure_image(client: Any, image: str) -> None:
    """Make sure ``image`` is in the engine's store: pull it if it is not
    (which fails without a registry, and then says how to build it)."""
    import docker  # type: ignore[import-untyped]

    if not isinstance(image, str) or not image.strip():
        raise ConfigurationError(f"image must be an image name such as 'execbox/base:latest', got {image!r}")
    if image_exists(client, image):
        return
    try:
        client.images.pull(image)
    except docker.errors.DockerException as exc:
        raise ImageMissingError(image, _short(exc)) from None


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "explanation", None) or exc).strip()
    return text.splitlines()[0][:300] if text else type(exc).__name__
