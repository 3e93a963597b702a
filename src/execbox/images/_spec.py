"""What an image is made of, and the content-addressed tag that names it.

A spec is pure data: the tag is a hash of everything that goes into the
image (the base recipe, packages, the requirements file's text, a
Dockerfile and its build context), so the same spec is built once and a
changed one gets a new tag. No I/O but reading the files the spec names.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError

__all__ = ["BASE_ALIAS", "BASE_RECIPE", "LABEL_KIND", "LABEL_SPEC", "ImageSpec", "base_recipe", "base_tag"]

# The base image: a Debian root file system made by debootstrap (no registry
# needed), with Python, pip and venv. Changing the recipe changes the tag.
BASE_RECIPE: dict[str, Any] = {
    "suite": "bookworm",
    "variant": "minbase",
    "include": ["python3", "python3-pip", "python3-venv"],
    "recipe": 1,
}
BASE_REPOSITORY = "execbox/base"
BASE_ALIAS = f"{BASE_REPOSITORY}:latest"  # what a user's Dockerfile can build FROM
LABEL_KIND = "org.execbox.kind"
LABEL_SPEC = "org.execbox.spec"
CONTEXT_LIMIT_FILES = 10_000


def _digest(data: Any) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def base_recipe(debian: tuple[str, ...] = ()) -> dict[str, Any]:
    """The base's recipe with ``debian`` packages included too (a language's
    toolchain: ``execbox images build --languages``)."""
    if not debian:
        return BASE_RECIPE
    return {**BASE_RECIPE, "include": [*BASE_RECIPE["include"], *sorted(set(debian))]}


def base_tag(debian: tuple[str, ...] = ()) -> str:
    """The content-addressed tag of the base image (with ``debian`` packages)."""
    return f"{BASE_REPOSITORY}:{_digest(base_recipe(debian))}"


@dataclass(frozen=True)
class ImageSpec:
    """An image execbox builds on top of a base image.

    - ``packages``: pip requirement strings, installed from a wheelhouse that
      the host fills with ``pip download`` (the build itself has no network).
    - ``requirements``: a requirements file, the same way.
    - ``dockerfile``: a user's Dockerfile instead (its folder is the build
      context); it should build ``FROM execbox/base:latest`` or another
      local image, since no registry may be reachable.
    - ``base``: the image to build on (default: execbox's base image).
    - ``lines``: Dockerfile instructions appended (ENV, CMD, EXPOSE...).
    - ``kind``: the repository name under ``execbox/`` (python, jupyter...).
    """

    packages: tuple[str, ...] = ()
    requirements: str | None = None
    dockerfile: str | None = None
    base: str | None = None
    lines: tuple[str, ...] = ()
    kind: str = "python"
    build_args: tuple[tuple[str, str], ...] = field(default=())

    def __post_init__(self) -> None:
        if isinstance(self.packages, str):
            raise ConfigurationError(
                "ImageSpec(packages=...) takes a list of requirement strings, not one string"
            )
        object.__setattr__(self, "packages", tuple(self.packages))
        object.__setattr__(self, "lines", tuple(self.lines))
        if self.requirements is not None:
            path = Path(self.requirements).expanduser().resolve()
            if not path.is_file():
                raise ConfigurationError(f"requirements file {str(self.requirements)!r} does not exist")
            object.__setattr__(self, "requirements", str(path))
        if self.dockerfile is not None:
            path = Path(self.dockerfile).expanduser().resolve()
            if path.is_dir():
                path = path / "Dockerfile"
            if not path.is_file():
                raise ConfigurationError(f"Dockerfile {str(self.dockerfile)!r} does not exist")
            object.__setattr__(self, "dockerfile", str(path))
            if self.packages or self.requirements or self.lines:
                raise ConfigurationError(
                    "give either a dockerfile or packages/requirements, not both: install the "
                    "packages in the Dockerfile (or build it first and use it as base=)"
                )

    @property
    def base_image(self) -> str:
        return self.base or base_tag()

    def description(self) -> dict[str, Any]:
        """What the tag is a hash of (also stored as the image's label)."""
        if self.dockerfile is not None:
            folder = Path(self.dockerfile).parent
            return {
                "dockerfile": Path(self.dockerfile).read_text(),
                "context": _context_digest(folder),
                "build_args": dict(self.build_args),
            }
        return {
            "base": self.base_image,
            "packages": sorted(self.packages),
            "requirements": Path(self.requirements).read_text() if self.requirements else None,
            "lines": list(self.lines),
        }

    @property
    def repository(self) -> str:
        return f"execbox/{'custom' if self.dockerfile else self.kind}"

    @property
    def tag(self) -> str:
        """The content-addressed tag this spec builds to."""
        return f"{self.repository}:{_digest(self.description())}"


def _context_digest(folder: Path) -> str:
    """A digest of a build context: every file's path, size and mtime."""
    entries = []
    for root, dirs, files in os.walk(folder):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(root, name)
            try:
                info = os.stat(path)
            except OSError:
                continue
            entries.append((os.path.relpath(path, folder), info.st_size, info.st_mtime_ns))
            if len(entries) > CONTEXT_LIMIT_FILES:
                raise ConfigurationError(
                    f"the Dockerfile's folder {str(folder)!r} holds more than {CONTEXT_LIMIT_FILES} files: "
                    "put the Dockerfile in a folder with only what the build needs"
                )
    return _digest(entries)
