"""The base image, made without a registry: debootstrap a Debian root file
system, stream it as a tar into ``docker import``, tag it by its recipe.

Needs root (debootstrap does) and a reachable Debian mirror
(``EXECBOX_DEBIAN_MIRROR``, default deb.debian.org).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from typing import Any

from .._cache import cache_dir
from .._errors import EnvironmentSetupError
from ._spec import BASE_ALIAS, LABEL_KIND, LABEL_SPEC, base_recipe, base_tag

__all__ = ["build_base"]

DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEBOOTSTRAP_TIMEOUT_S = 1800
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def build_base(
    client: Any, progress: Callable[[str], None], *, rebuild: bool = False, debian: tuple[str, ...] = ()
) -> str:
    """Build the base image unless its tag exists; return the tag.
    ``debian``: Debian packages debootstrap includes too (their
    dependencies resolved from the same mirror); that image is not the
    ``execbox/base:latest`` alias."""
    from .._docker_engine import engine_errors, image_exists

    tag = base_tag(debian)
    recipe = base_recipe(debian)
    if not rebuild and image_exists(client, tag):
        if not debian:
            _alias(client, tag)
        return tag
    debootstrap = shutil.which("debootstrap") or (
        "/usr/sbin/debootstrap" if os.path.exists("/usr/sbin/debootstrap") else None
    )
    if debootstrap is None:
        raise EnvironmentSetupError(
            "building the base image needs debootstrap: apt-get install debootstrap "
            "(scripts/docker-engine.sh does)"
        )
    if os.geteuid() != 0:
        raise EnvironmentSetupError("building the base image needs root (debootstrap): run it with sudo")
    mirror = os.environ.get("EXECBOX_DEBIAN_MIRROR", DEFAULT_MIRROR)
    work = cache_dir() / "rootfs"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        rootfs = os.path.join(tmp, "rootfs")
        progress(
            f"debootstrap {recipe['suite']} ({recipe['variant']}, "
            f"{', '.join(recipe['include'])}) from {mirror}"
        )
        argv = [
            debootstrap,
            f"--variant={recipe['variant']}",
            f"--include={','.join(recipe['include'])}",
            recipe["suite"],
            rootfs,
            mirror,
        ]
        _run_showing(argv, progress)
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in os.scandir(os.path.join(rootfs, junk)):
                if entry.is_file() and entry.name not in ("lock",):
                    os.unlink(entry.path)
        progress(f"importing the root file system as {tag}")
        repository, _, version = tag.partition(":")
        changes = [
            f"ENV PATH={PATH}",
            "ENV LANG=C.UTF-8",
            f"LABEL {LABEL_KIND}=base",
            f"LABEL {LABEL_SPEC}={json.dumps(json.dumps(recipe, sort_keys=True))}",
            'CMD ["/bin/bash"]',
        ]
        tar = subprocess.Popen(["tar", "-C", rootfs, "--numeric-owner", "-c", "."], stdout=subprocess.PIPE)
        try:
            assert tar.stdout is not None
            with engine_errors(
                f"importing {tag}",
                error=lambda text: EnvironmentSetupError(f"importing {tag} failed: {text}"),
            ):
                client.api.import_image(
                    src=tar.stdout, repository=repository, tag=version, changes=changes, stream_src=True
                )
        finally:
            tar.stdout.close() if tar.stdout else None
            tar.wait()
        if tar.returncode != 0:
            raise EnvironmentSetupError(f"tar of the root file system failed (exit {tar.returncode})")
    if debian:
        progress(f"built {tag}")
        return tag
    _alias(client, tag)
    progress(f"built {tag} (also tagged {BASE_ALIAS})")
    return tag


def _alias(client: Any, tag: str) -> None:
    repository, _, version = BASE_ALIAS.partition(":")
    client.images.get(tag).tag(repository, version)


def _run_showing(argv: list[str], progress: Callable[[str], None]) -> None:
    """Run a set-up command, showing its lines as progress; the last lines
    go into the error if it fails."""
    tail: list[str] = []
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        if line:
            tail = [*tail, line][-15:]
            # one line per step; a line per package retrieved or validated is noise
            if line.startswith("I: ") and not line.startswith(("I: Retrieving ", "I: Validating ")):
                progress(line[3:])
    try:
        proc.wait(timeout=DEBOOTSTRAP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise EnvironmentSetupError(f"{argv[0]} still ran after {DEBOOTSTRAP_TIMEOUT_S} s") from None
    if proc.returncode != 0:
        raise EnvironmentSetupError(
            f"{os.path.basename(argv[0])} failed (exit {proc.returncode}); is the Debian mirror reachable "
            "(EXECBOX_DEBIAN_MIRROR)?\n" + "\n".join(tail)
        )
