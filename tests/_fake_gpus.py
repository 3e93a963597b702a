"""A host's GPUs as the sandbox reads them, made in a folder: device
nodes (links to the kernel's null device under NVIDIA's names: a jail binds
and opens them as it would a GPU's) and the driver's /proc files."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from execbox import _gpus
from execbox._gpus import GpuHost

UUID0 = "GPU-11111111-2222-3333-4444-555555555555"


@contextmanager
def fake_gpu_host() -> Iterator[GpuHost]:
    """/dev with two GPUs, nvidiactl, nvidia-uvm and a MIG capability, and
    the driver's /proc files for GPU 0 only; every executor reads it. Not
    under pytest's folder (0700): the jail's id must reach the nodes bwrap
    binds, as it does /dev's. The host's own GPUs are read again once it ends."""
    root = Path(tempfile.mkdtemp(prefix="execbox-gpus-"))
    patch = pytest.MonkeyPatch()
    try:
        dev = root / "dev"
        (dev / "nvidia-caps").mkdir(parents=True)
        for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "nvidia-caps/nvidia-cap1"):
            # the kernel's null device under the name: a character device to whoever stats it
            # (and bubblewrap binds it), with no mknod, so a user who is not root runs these too
            os.symlink("/dev/null", dev / name)
        (dev / "nvidia7").write_text("a regular file is no GPU")
        info = root / "driver" / "gpus" / "0000:3b:00.0"
        info.mkdir(parents=True)
        (info / "information").write_text(
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {UUID0}\nDevice Minor: \t 0\n"
        )
        (root / "driver" / "version").write_text(
            "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Tue Sep 30 2025\n"
        )
        for folder in (root, dev, dev / "nvidia-caps"):
            folder.chmod(0o755)  # a leased jail id reaches the nodes bwrap binds
        host = GpuHost(dev=str(dev), driver=str(root / "driver"), search_path="/nonexistent")
        patch.setattr(_gpus, "GpuHost", lambda: host)
        yield host
    finally:
        patch.undo()
        shutil.rmtree(root, ignore_errors=True)
