"""A Python environment that is a Docker image: a given image, or one built
locally from the base image plus packages, a requirements file or a
Dockerfile. The docker backend runs it; a host-side executor cannot."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Self

from .._errors import ConfigurationError
from ._base import Environment, OnProgress

__all__ = ["DockerPython", "with_pip_packages"]


class DockerPython(Environment):
    """Python in a container image (run it with ``DockerExecutor``).

    - ``image``: an image to use as it is, or the base to install
      ``pip_packages`` / ``requirements_file`` on (default: execbox's base
      image, Debian + Python, built locally when missing).
    - ``dockerfile``: build this Dockerfile instead (``FROM
      execbox/base:latest`` works without a registry).
    - ``volumes``: extra mounts, ``{host: {"bind": path, "mode": "ro"}}`` or
      ``["host:path:ro"]``.
    - ``cleanup_container``: remove the container when it stops (default).
    - ``keep_container_running``: leave it running after ``close()``.
    """

    def __init__(
        self,
        image: str | None = None,
        *,
        pip_packages: Sequence[str] = (),
        requirements_file: str | os.PathLike[str] | None = None,
        dockerfile: str | os.PathLike[str] | None = None,
        volumes: Mapping[str, Any] | Iterable[str] | None = None,
        cleanup_container: bool = True,
        keep_container_running: bool = False,
    ) -> None:
        from ..images import ImageSpec

        if isinstance(pip_packages, str):
            raise ConfigurationError("DockerPython(pip_packages=...) takes a list of requirement strings")
        if dockerfile is not None and image is not None:
            raise ConfigurationError("DockerPython: give image= or dockerfile=, not both")
        self.image = image
        self.pip_packages = tuple(pip_packages)
        self.requirements_file = str(requirements_file) if requirements_file is not None else None
        self.dockerfile = str(dockerfile) if dockerfile is not None else None
        self.volumes = volumes
        self.cleanup_container = cleanup_container
        self.keep_container_running = keep_container_running
        self._spec: ImageSpec | None = None
        if self.pip_packages or self.requirements_file or self.dockerfile:
            self._spec = ImageSpec(
                packages=self.pip_packages,
                requirements=self.requirements_file,
                dockerfile=self.dockerfile,
                base=image,
            )

    def __repr__(self) -> str:
        return (
            f"DockerPython(image={self.image!r}, pip_packages={list(self.pip_packages)!r}, "
            f"dockerfile={self.dockerfile!r})"
        )

    @property
    def tag(self) -> str | None:
        """The tag of the image to run (None: execbox's base image)."""
        return self._spec.tag if self._spec is not None else self.image

    def build(self, on_progress: OnProgress = None) -> str:
        """Make the image ready (built once per spec, or pulled); its tag."""
        from .._docker_engine import docker_client, ensure_image
        from ..images import build_image

        if self._spec is not None:
            return build_image(self._spec, on_progress=on_progress)
        if self.image is None:
            return build_image(on_progress=on_progress)
        ensure_image(docker_client(), self.image)
        return self.image

    def __enter__(self) -> Self:
        self.build()
        return self

    def prepare(self, on_progress: OnProgress = None) -> str:
        raise ConfigurationError(
            "DockerPython is a container image, not an interpreter on this machine: run it with "
            "DockerExecutor(environment=...) (backend='docker')"
        )


def with_pip_packages(
    image: DockerPython, packages: Sequence[str], on_progress: OnProgress = None
) -> DockerPython:
    """``image`` with ``packages`` pip-installed on top: a derived image's
    spec (built by its ``build()``). A Dockerfile's image takes no packages,
    so it is built (``on_progress``) and becomes the base of the new one."""
    common: dict[str, Any] = dict(
        volumes=image.volumes,
        cleanup_container=image.cleanup_container,
        keep_container_running=image.keep_container_running,
    )
    if image.dockerfile is not None:
        return DockerPython(image.build(on_progress), pip_packages=packages, **common)
    return DockerPython(
        image.image,
        pip_packages=(*image.pip_packages, *packages),
        requirements_file=image.requirements_file,
        **common,
    )
