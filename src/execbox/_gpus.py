"""GPUs a block may be given: what ``gpus=`` means, what the host has
(NVIDIA device nodes, the driver's files) and what a jail binds for them.

``gpus`` (the sandbox, Docker, the CLI's ``--gpus``, a service request):

- ``None`` (the default): no GPU;
- ``"all"``: every GPU of the host;
- an index (``0``), a UUID (``"GPU-8f..."``), a list of them, or a
  comma-separated string (``"0,1"``, as ``--gpus`` takes it).

A jail given GPUs (``GpuGrant``) holds the chosen GPUs' nodes
(``/dev/nvidiaN``, N the device minor, nvidia-smi's "Minor Number") and the
nodes every CUDA process opens (``nvidiactl``, ``nvidia-uvm``,
``nvidia-uvm-tools``, and ``/dev/nvidia-caps/*`` for MIG) where the host
has them; no other GPU's node, so a block cannot open another GPU. The
driver's libraries and ``nvidia-smi`` are bound read-only where they lie
outside the system folders every jail binds. ``CUDA_VISIBLE_DEVICES`` names
the chosen GPUs by UUID where the driver tells them (in a jail holding only
some nodes, CUDA numbers the GPUs it can open from 0, so a host index
would point elsewhere); ``NVIDIA_VISIBLE_DEVICES`` says what was asked,
as the NVIDIA container toolkit sets it.

What the host has is read from files (``GpuHost``: ``/dev`` and
``/proc/driver/nvidia``), never from a library loaded into execbox: the
tests point ``GpuHost`` at a folder of device nodes they made.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ._errors import BackendUnavailableError, ConfigurationError

__all__ = [
    "DRIVER_HINT",
    "GPU_BACKENDS",
    "Gpu",
    "GpuGrant",
    "GpuHost",
    "check_gpu_backend",
    "describe",
    "grant",
    "host_gpus",
    "parse_gpus",
]

GPU_BACKENDS = ("sandbox", "docker")  # the backends that take gpus=

SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
CAPS_DIR = "nvidia-caps"
DRIVER_LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1")
DRIVER_HOMES = ("/usr/local/nvidia",)  # where GPU images and some clouds put the driver
SYSTEM_PREFIXES = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/")
DRIVER_HINT = (
    "install the NVIDIA driver (its kernel module makes /dev/nvidia0... and `nvidia-smi` lists "
    "the GPUs), or drop gpus"
)
_NODE = re.compile(r"nvidia(\d+)")
_UUID = re.compile(r"(GPU|MIG)-[0-9A-Za-z/-]{1,80}")  # MIG: also the older MIG-GPU-<uuid>/<gi>/<ci>
_MAX_GPUS = 256


@dataclass(frozen=True)
class Gpu:
    index: int  # the device minor: /dev/nvidia<index>
    node: str
    uuid: str = ""
    model: str = ""
    bus_id: str = ""


@dataclass(frozen=True)
class GpuHost:
    """Where the host's GPUs are read from (the real paths by default)."""

    dev: str = "/dev"
    driver: str = "/proc/driver/nvidia"
    search_path: str = field(default_factory=lambda: os.environ.get("PATH", os.defpath))

    def driver_version(self) -> str:
        try:
            text = Path(self.driver, "version").read_text(errors="replace")[:4096]
        except OSError:
            return ""
        found = re.search(r"Kernel Module(?: for [\w-]+)?\s+([\d.]+)", text)
        return found.group(1) if found else ""


@dataclass(frozen=True)
class GpuGrant:
    """What a jail is given for the chosen GPUs (the module docstring)."""

    gpus: tuple[Gpu, ...]
    nodes: tuple[tuple[str, str], ...]  # (host node, the node's path inside: /dev/...)
    readonly: tuple[str, ...] = ()  # driver folders outside the system folders
    env: tuple[tuple[str, str], ...] = ()
    library_path: tuple[str, ...] = ()  # LD_LIBRARY_PATH for driver folders the loader's cache misses
    bin_path: tuple[str, ...] = ()  # PATH for an nvidia-smi outside the jail's PATH


def parse_gpus(value: object, where: str = "gpus") -> tuple[str, ...] | None:
    """``gpus`` as a tuple of "all", indices (as text) and UUIDs; None for no GPU."""
    if value is None or value is False or value == "" or value == "none":
        return None
    if value is True:
        raise ConfigurationError(
            f"{where}=True is ambiguous: pass gpus='all', an index (0) or a list ([0, 1])"
        )
    items: list[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, int):
        items = [value]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigurationError(
            f"{where} is None, 'all', an index, a UUID or a list of them, got {type(value).__name__}"
        )
    if not items or len(items) > _MAX_GPUS:
        raise ConfigurationError(
            f"{where}: give 'all', or between 1 and {_MAX_GPUS} GPUs, got {_shown(value)}"
        )
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (int, str)):
            raise ConfigurationError(f"{where}: each GPU is an index or a UUID, got {_shown(item)}")
        text = str(item).strip()
        if text == "all":
            if len(items) != 1:
                raise ConfigurationError(f"{where}: 'all' stands alone, got {_shown(value)}")
            return ("all",)
        if not (text.isdigit() and int(text) < 1 << 20) and not _UUID.fullmatch(text):
            raise ConfigurationError(
                f"{where}: {_shown(text)} is neither a GPU index (0, 1, ...) nor a UUID (GPU-..., as "
                "`nvidia-smi -L` shows it)"
            )
        text = str(int(text)) if text.isdigit() else text
        if text not in out:
            out.append(text)
    return tuple(out)


def check_gpu_backend(backend: str, name: str = "gpus", fix: str = "") -> None:
    """Refuse ``gpus`` on a backend that does not take them (``name``: how the
    caller spelled it; ``fix``: what to do, after the reason)."""
    if backend not in GPU_BACKENDS:
        raise ConfigurationError(
            f"{name} is for the {' and '.join(GPU_BACKENDS)} backends, not {backend!r}"
            + (f": {fix}" if fix else "")
        )


def _shown(value: object) -> str:
    """A value for an error message, bounded (it may come from a request)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def host_gpus(host: GpuHost | None = None) -> list[Gpu]:
    """The host's NVIDIA GPUs: its ``/dev/nvidiaN`` character devices, with
    the UUID, model and bus id the driver's /proc files give."""
    host = host or GpuHost()
    try:
        names = os.listdir(host.dev)
    except OSError:
        return []
    about = _driver_info(host)
    found: list[Gpu] = []
    for name in names:
        match = _NODE.fullmatch(name)
        if match is None:
            continue
        path = os.path.join(host.dev, name)
        try:
            if not stat.S_ISCHR(os.stat(path).st_mode):
                continue
        except OSError:
            continue
        index = int(match.group(1))
        uuid, model, bus_id = about.get(index, ("", "", ""))
        found.append(Gpu(index, path, uuid, model, bus_id))
    return sorted(found, key=lambda g: g.index)[:_MAX_GPUS]


def _driver_info(host: GpuHost) -> dict[int, tuple[str, str, str]]:
    """Device minor -> (UUID, model, bus id), from /proc/driver/nvidia/gpus/*/information."""
    out: dict[int, tuple[str, str, str]] = {}
    try:
        buses = sorted(os.listdir(os.path.join(host.driver, "gpus")))[:_MAX_GPUS]
    except OSError:
        return out
    for bus in buses:
        try:
            text = Path(host.driver, "gpus", bus, "information").read_text(errors="replace")[:16384]
        except OSError:
            continue
        fields = {}
        for line in text.splitlines():
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        minor = fields.get("Device Minor", "")
        if minor.isdigit():
            out[int(minor)] = (fields.get("GPU UUID", ""), fields.get("Model", ""), bus)
    return out


def grant(value: object, host: GpuHost | None = None, *, backend: str = "sandbox") -> GpuGrant | None:
    """What a jail is given for ``gpus=value`` on this host (None: no GPU).
    Raises ConfigurationError for a bad value or a GPU the host has not,
    BackendUnavailableError when the host has no GPU at all."""
    wanted = parse_gpus(value)
    if wanted is None:
        return None
    host = host or GpuHost()
    present = host_gpus(host)
    if not present:
        raise BackendUnavailableError(
            backend,
            f"gpus={','.join(wanted)!r} was asked, but this host shows no NVIDIA GPU (no {host.dev}/nvidia0 "
            f"character device): {DRIVER_HINT}",
        )
    if wanted == ("all",):
        chosen = present
    else:
        chosen = []
        for item in wanted:
            gpu = next((g for g in present if str(g.index) == item or g.uuid == item), None)
            if gpu is None:
                have = ", ".join(f"{g.index}" + (f" ({g.uuid})" if g.uuid else "") for g in present)
                raise ConfigurationError(
                    f"gpus: this host has no GPU {item!r}; it has {have} (nvidia-smi -L)"
                )
            if gpu not in chosen:
                chosen.append(gpu)
    names = [os.path.basename(g.node) for g in chosen] + list(SHARED_NODES)
    try:
        names += [f"{CAPS_DIR}/{n}" for n in sorted(os.listdir(os.path.join(host.dev, CAPS_DIR)))[:64]]
    except OSError:
        pass
    nodes = [
        (os.path.join(host.dev, n), f"/dev/{n}") for n in names if _is_char_device(os.path.join(host.dev, n))
    ]
    readonly, library_path, bin_path = _driver_files(host)
    env = [("NVIDIA_VISIBLE_DEVICES", "all" if wanted == ("all",) else ",".join(wanted))]
    if all(g.uuid for g in chosen):
        env.append(("CUDA_VISIBLE_DEVICES", ",".join(g.uuid for g in chosen)))
    return GpuGrant(
        gpus=tuple(chosen),
        nodes=tuple(nodes),
        readonly=tuple(readonly),
        env=tuple(env),
        library_path=tuple(library_path),
        bin_path=tuple(bin_path),
    )


def _is_char_device(path: str) -> bool:
    try:
        return stat.S_ISCHR(os.stat(path).st_mode)
    except OSError:
        return False


def _driver_files(host: GpuHost) -> tuple[list[str], list[str], list[str]]:
    """(folders to bind read-only, library folders, bin folders) of the
    driver that the jail's system binds and loader cache do not cover."""
    readonly: list[str] = []
    libraries: list[str] = []
    cached = _loader_folders()
    for folder in cached:
        if not (folder + "/").startswith(SYSTEM_PREFIXES) and folder not in readonly:
            readonly.append(folder)
    for home in DRIVER_HOMES:  # a driver home the loader's cache does not list: found by LD_LIBRARY_PATH
        for sub in ("lib64", "lib"):
            folder = os.path.join(home, sub)
            if folder in cached or not any(os.path.exists(os.path.join(folder, n)) for n in DRIVER_LIBRARIES):
                continue
            libraries.append(folder)
            if not (folder + "/").startswith(SYSTEM_PREFIXES) and folder not in readonly:
                readonly.append(folder)
    bins: list[str] = []
    smi = shutil.which("nvidia-smi", path=":".join([host.search_path, *(f"{h}/bin" for h in DRIVER_HOMES)]))
    if smi:
        folder = os.path.dirname(os.path.realpath(smi))
        if folder not in ("/usr/bin", "/bin", "/usr/local/bin"):
            bins.append(folder)
            if not (folder + "/").startswith(SYSTEM_PREFIXES) and folder not in readonly:
                readonly.append(folder)
    return readonly, libraries, bins


@functools.cache
def _loader_folders() -> tuple[str, ...]:
    """Folders of the driver's libraries in the loader's cache (``ldconfig -p``),
    read once per process: every GPU executor's start (and kernel's) asks."""
    ldconfig = shutil.which("ldconfig", path="/sbin:/usr/sbin:/usr/bin:/bin")
    if ldconfig is None:
        return ()
    try:
        done = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ()
    folders: list[str] = []
    for line in done.stdout.splitlines()[:100_000]:
        name, _, target = line.strip().partition(" => ")
        if name.split(" ", 1)[0] in DRIVER_LIBRARIES and target:
            folder = os.path.dirname(os.path.realpath(target))
            if folder not in folders:
                folders.append(folder)
    return tuple(folders)


def describe(gpus: Sequence[Gpu]) -> list[str]:
    """One line per GPU, for doctor."""
    return [
        f"GPU {g.index}: {g.model or 'model unknown'}" + (f", {g.uuid}" if g.uuid else "") + f" ({g.node})"
        for g in gpus
    ]
