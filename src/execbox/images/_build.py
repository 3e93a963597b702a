"""Building and listing execbox's images.

``build_image(spec)`` builds the base image if needed, then the spec's image
unless its content-addressed tag exists. Python packages are downloaded on
the host into a wheelhouse (``pip download``) and installed in the image
with ``--no-index``: the build itself runs without network, so it works
where no registry is reachable.
"""

from __future__ import annotations

import fcntl
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._cache import cache_dir
from .._docker_engine import docker_client, engine_errors, image_exists
from .._errors import ConfigurationError, EnvironmentSetupError
from .._progress import OnProgress, Progress, check_on_progress, reporting
from ._rootfs import build_base
from ._spec import LABEL_KIND, LABEL_SPEC, ImageSpec, base_tag

__all__ = ["ImageInfo", "build_image", "language_packages", "list_images"]

VENV = "/opt/execbox/venv"
PIP_TIMEOUT_S = 1800
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@dataclass(frozen=True)
class ImageInfo:
    """An image execbox built: its tags, kind (base, python, jupyter,
    custom...), what it was built from, size and creation time."""

    tags: tuple[str, ...]
    kind: str
    spec: str
    size_mb: float
    created: str


def language_packages(languages: Sequence[str]) -> tuple[str, ...]:
    """The Debian packages of the toolchains of ``languages`` (names of the
    language table, or ``all``), beyond the base image's Python and shells."""
    from .._languages import LANGUAGES, find_language

    names = [lang.name for lang in LANGUAGES if lang.package] if list(languages) == ["all"] else languages
    packages: list[str] = []
    for name in names:
        lang = find_language(name)
        if lang is None or not lang.runnable:
            known = ", ".join(sorted(lang.name for lang in LANGUAGES if lang.runnable))
            raise ConfigurationError(
                f"--languages names {name!r}, which is not a language execbox runs: {known}"
            )
        if not lang.package:
            raise ConfigurationError(
                f"{lang.name} has no Debian package to build into an image ({lang.install_hint})"
            )
        # the base has python3 and the shells; TypeScript's are two (esbuild, and nodejs to run it)
        packages.extend(p for p in lang.package.split() if p not in ("python3", "bash", "dash"))
    return tuple(sorted(set(packages)))


def build_image(
    spec: ImageSpec | None = None,
    *,
    on_progress: OnProgress = None,
    rebuild: bool = False,
    languages: Sequence[str] = (),
) -> str:
    """Build the image of ``spec`` (``None``: the base image) unless it
    exists; return its tag. ``languages``: the base image is debootstrapped
    with their toolchains too, from Debian's packages (``spec`` must then
    be None; it is the image to run those languages in). ``on_progress``
    gets the build's steps (``execbox._progress``; default: a spinner on a
    terminal, log lines otherwise)."""
    check_on_progress(on_progress, "build_image")
    with reporting(on_progress) as show:
        return _build(spec, show, rebuild, languages)


def _build(spec: ImageSpec | None, show: Progress, rebuild: bool, languages: Sequence[str]) -> str:
    client = docker_client()
    debian = language_packages(languages) if languages else ()
    if debian and spec is not None:
        raise ConfigurationError(
            "build the languages' image on its own: it is a base (give --languages alone)"
        )
    with _lock(base_tag(debian)):
        base = build_base(client, show, rebuild=rebuild and spec is None, debian=debian)
    if spec is None:
        return base
    with _lock(spec.tag):
        tag = spec.tag
        if not rebuild and image_exists(client, tag):
            return tag
        if spec.base is not None and not image_exists(client, spec.base):
            from .._docker_engine import ensure_image

            ensure_image(client, spec.base)
        with tempfile.TemporaryDirectory(prefix="execbox-build-") as context:
            if spec.dockerfile is not None:
                folder, dockerfile = str(Path(spec.dockerfile).parent), Path(spec.dockerfile).name
            else:
                folder, dockerfile = context, "Dockerfile"
                _package_context(client, spec, Path(context), show)
            show(f"building {tag}")
            _docker_build(client, folder, dockerfile, tag, spec, show)
    show(f"built {tag}")
    return tag


def list_images() -> list[ImageInfo]:
    """The images execbox built that the engine holds, newest first."""
    client = docker_client()
    found = []
    for image in client.images.list(filters={"label": LABEL_KIND}):
        labels = image.labels or {}
        found.append(
            ImageInfo(
                tags=tuple(image.tags),
                kind=labels.get(LABEL_KIND, "?"),
                spec=labels.get(LABEL_SPEC, ""),
                size_mb=round(image.attrs.get("Size", 0) / 1e6, 1),
                created=str(image.attrs.get("Created", ""))[:19],
            )
        )
    return sorted(found, key=lambda info: info.created, reverse=True)


def _package_context(client: Any, spec: ImageSpec, context: Path, show: Progress) -> None:
    """Fill a build context: the wheelhouse, the requirements and a
    two-stage Dockerfile that installs them into a venv on the base."""
    wheels = context / "wheels"
    wheels.mkdir()
    args = list(spec.packages)
    if spec.requirements:
        shutil.copy(spec.requirements, context / "requirements.txt")
        args += ["-r", str(context / "requirements.txt")]
    lines = [f"FROM {spec.base_image}"]
    if args:
        version = _image_python(client, spec.base_image)
        show(
            f"downloading {', '.join(spec.packages) or 'the requirements'} (for Python {version}) "
            "into a wheelhouse"
        )
        _download(args, wheels, version)
        install = " ".join(_quote(p) for p in spec.packages)
        if spec.requirements:
            install += " -r /build/requirements.txt"
        lines = [
            f"FROM {spec.base_image} AS build",
            "COPY . /build",
            f"RUN python3 -m venv {VENV} && {VENV}/bin/pip install --no-index --find-links /build/wheels "
            f"--no-cache-dir --disable-pip-version-check -q {install}",
            f"FROM {spec.base_image}",
            f"COPY --from=build {VENV} {VENV}",
            f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "
            f"VIRTUAL_ENV={VENV}",
        ]
    lines += list(spec.lines)
    (context / "Dockerfile").write_text("\n".join(lines) + "\n")


def _image_python(client: Any, image: str) -> str:
    """The version of the image's python3 (major.minor.micro)."""
    with engine_errors(
        f"the Python version of {image} could not be read",
        image=image,
        error=lambda text: EnvironmentSetupError(
            f"the Python version of {image} could not be read (does it have python3?): {text}"
        ),
    ):
        out = client.containers.run(
            image,
            ["python3", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            remove=True,
            network_mode="none",
        )
    return out.decode().strip()


def _download(args: list[str], dest: Path, version: str) -> None:
    """pip download of wheels for the image's Python version (its micro
    version too: some packages require one)."""
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "-q",
        "--dest",
        str(dest),
        "--only-binary=:all:",
        "--python-version",
        version,
        *args,
    ]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EnvironmentSetupError(f"pip download still ran after {PIP_TIMEOUT_S} s") from None
    if done.returncode != 0:
        detail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-12:])
        raise EnvironmentSetupError(
            f"could not download wheels for Python {version} (the image's) into the wheelhouse; check the "
            f"names and versions (packages=..., requirements=...); packages without wheels cannot be "
            f"installed this way:\n{detail}"
        )


def _docker_build(
    client: Any, folder: str, dockerfile: str, tag: str, spec: ImageSpec, show: Progress
) -> None:
    labels = {
        LABEL_KIND: "custom" if spec.dockerfile else spec.kind,
        LABEL_SPEC: json.dumps(_summary(spec), sort_keys=True),
    }
    tail: list[str] = []
    with engine_errors(
        f"docker build of {tag}",
        error=lambda text: EnvironmentSetupError(f"docker build of {tag} failed: {text}"),
    ):
        for chunk in client.api.build(
            path=folder,
            dockerfile=dockerfile,
            tag=tag,
            rm=True,
            forcerm=True,
            network_mode="none",
            pull=False,
            labels=labels,
            decode=True,
            buildargs=dict(spec.build_args) or None,
        ):
            if "error" in chunk:
                detail = "\n".join([*tail[-10:], str(chunk["error"]).strip()])
                hint = ""
                steps = [line for line in tail if line.startswith("Step ")]
                if steps and " : FROM " in steps[-1]:
                    hint = (
                        " (no registry may be reachable: build FROM execbox/base:latest or another "
                        "local image; `execbox images list` shows them)"
                    )
                raise EnvironmentSetupError(f"docker build of {tag} failed{hint}:\n{detail}")
            line = _ANSI.sub("", str(chunk.get("stream", ""))).strip()
            if line:
                tail = [*tail, line][-15:]
                if line.startswith("Step "):
                    show(line)


def _summary(spec: ImageSpec) -> dict[str, Any]:
    if spec.dockerfile:
        return {"dockerfile": spec.dockerfile}
    return {"base": spec.base_image, "packages": list(spec.packages), "requirements": spec.requirements}


def _quote(requirement: str) -> str:
    if "'" in requirement:
        raise ConfigurationError(f"package {requirement!r}: a requirement string cannot hold a quote")
    return f"'{requirement}'"


@contextmanager
def _lock(tag: str) -> Iterator[None]:
    """One builder per tag across processes; the others wait, then reuse."""
    folder = cache_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / (tag.replace("/", "_").replace(":", "_") + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
