"""The GPU check: CUDA in every way the sandbox runs a block, on a host with
an NVIDIA GPU, in a few minutes. ``scripts/gpu-check.sh`` runs it (it needs
only this checkout, bubblewrap and the driver; PyTorch where the host has it).

What it runs, each a row of the table it prints (and writes as JSON to
``$OUT/gpu-check.json`` when ``OUT`` is set):

- the host: the GPUs, the driver, ``nvidia-smi -L``;
- CUDA (``cuInit`` and the device count through libcuda, no framework) in
  ``--blocks`` blocks of each mode: one-shot, pooled, the stateful session
  (cells), and the Landlock tier, run by 8 callers at once; every block
  must answer ``cuInit 0``;
- ``nvidia-smi`` in a block;
- isolation: a block given GPU 0 finds no other GPU's node, and cannot open one;
- latency: the first and the next block (one-shot), a session's first cell
  and the next ones (a PyTorch matmul when PyTorch is there), and
  ``import torch`` in a GPU session with and without ``preload=["torch"]``;
- CUDA in the jailed Jupyter kernel (``JupyterExecutor(gpus=...)``);
- ``Limits.gpu_memory_mb``: a block that takes 2 GB under a 512 MB limit is
  killed, and its result names the limit.

``--dry-run`` prints the plan; on a host without a GPU the script says so,
checks that asking for one is refused with the driver named, and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from execbox import (
    BackendUnavailableError,
    CodeBlock,
    ConfigurationError,
    JupyterExecutor,
    Limits,
    SandboxExecutor,
)
from execbox._gpus import host_gpus

CUDA = (
    "import ctypes\n"
    "cuda = ctypes.CDLL('libcuda.so.1')\n"
    "n = ctypes.c_int(-1)\n"
    "code = cuda.cuInit(0)\n"
    "cuda.cuDeviceGetCount(ctypes.byref(n))\n"
    "print('cuInit', code, 'devices', n.value)\n"
)
TORCH_CELL = "import torch\na = torch.ones(1024, 1024, device='cuda')\nprint(float((a @ a).sum().item()))\n"
HOG = (  # 2 GB of GPU memory through the driver, then held
    CUDA
    + "dev = ctypes.c_int(); cuda.cuDeviceGet(ctypes.byref(dev), 0)\n"
    + "ctx = ctypes.c_void_p(); cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev)\n"
    + "ptr = ctypes.c_ulonglong()\n"
    + "print('alloc', cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(2 << 30)), flush=True)\n"
    + "import time; time.sleep(30)\n"
)
NODES = (
    "import os\n"
    "print(sorted(n for n in os.listdir('/dev') if n.startswith('nvidia') and n[6:].isdigit()))\n"
    "for n in range(1, 8):\n"
    "    try:\n"
    "        open(f'/dev/nvidia{n}', 'rb').close(); print('opened', n)\n"
    "    except OSError as e:\n"
    "        pass\n"
)
MODES: dict[str, dict[str, Any]] = {
    "one-shot": {"pool": False},
    "pool": {"pool_size": 8},
    "stateful": {"stateful": True},
    "landlock": {"isolation": "landlock"},
}
rows: list[dict[str, Any]] = []


def row(check: str, ok: bool | None, seen: str, **extra: Any) -> None:
    rows.append({"check": check, "ok": ok, "seen": seen, **extra})
    mark = {True: "ok", False: "FAIL", None: "--"}[ok]
    print(f"| {check} | {mark} | {seen} |", flush=True)


def timed(ex: SandboxExecutor, code: str) -> tuple[Any, float]:
    start = time.perf_counter()
    result = ex.run(CodeBlock("python", code))
    return result, (time.perf_counter() - start) * 1000


def cuda_blocks(mode: str, blocks: int) -> None:
    try:
        with SandboxExecutor(gpus="all", **MODES[mode]) as ex:
            first, first_ms = timed(ex, CUDA)
            callers = 1 if mode == "stateful" else 8
            with ThreadPoolExecutor(callers) as threads:
                answers = list(threads.map(lambda _: timed(ex, CUDA), range(blocks)))
    except BackendUnavailableError as exc:
        row(f"CUDA in {mode} blocks", False, str(exc)[:300])
        return
    good = sum(r.stdout.startswith("cuInit 0 ") for r, _ in answers)
    times = [ms for _, ms in answers]
    bad = next((r for r, _ in answers if not r.stdout.startswith("cuInit 0 ")), None)
    median = statistics.median(times)
    seen = (
        f"{good}/{blocks} cuInit 0; first {first_ms:.0f} ms ({first.stdout.strip()}), median {median:.0f} ms"
    )
    if bad is not None:
        seen += f"; a failure: {(bad.stdout + bad.stderr).strip()[-200:]!r}"
    row(f"CUDA in {mode} blocks", good == blocks, seen, first_ms=first_ms, median_ms=statistics.median(times))


def torch_rows() -> None:
    try:
        import torch  # noqa: F401  (only whether the host has it)
    except ImportError:
        row("PyTorch latency", None, "PyTorch is not installed on this host: skipped")
        return
    with SandboxExecutor(gpus="all", stateful=True) as ex:
        first, first_ms = timed(ex, TORCH_CELL)
        later = [timed(ex, TORCH_CELL)[1] for _ in range(20)]
    ok = first.exit_code == 0 and first.stdout.strip() == str(float(1024**3))
    said = first.stdout.strip() or first.stderr.strip()[-200:]
    median = statistics.median(later)
    row(
        "stateful GPU session: torch matmul cell",
        ok,
        f"first {first_ms:.0f} ms, next median {median:.1f} ms; {said}",
    )
    for preload in ((), ("torch",)):  # a GPU session's unit takes preload; pooled GPU blocks are a jail each
        with SandboxExecutor(gpus="all", stateful=True, preload=list(preload)) as ex:
            result, cold = timed(ex, "import torch")
        row(f"stateful, preload={list(preload)}: import torch", result.exit_code == 0, f"{cold:.0f} ms")


def memory_row() -> None:
    limits = Limits(gpu_memory_mb=512, timeout_s=60)
    with SandboxExecutor(gpus="all", pool=False, limits=limits) as ex:
        result, ms = timed(ex, HOG)
    error = result.error.name if result.error else None
    ok = error == "GpuMemoryLimit" and ms < 15_000
    row(
        "Limits.gpu_memory_mb=512: a block holding 2 GB is killed",
        ok,
        f"{error} after {ms:.0f} ms; {result.output.strip()[-200:]!r}",
    )


def kernel_row() -> None:
    try:
        with JupyterExecutor(gpus="all") as ex:
            first, first_ms = timed(ex, CUDA)
            _, next_ms = timed(ex, "print(cuda.cuInit(0))")
    except (BackendUnavailableError, ConfigurationError) as exc:
        row("CUDA in the jailed Jupyter kernel", False, str(exc)[:300])
        return
    ok = first.stdout.startswith("cuInit 0 ")
    row(
        "CUDA in the jailed Jupyter kernel",
        ok,
        f"{first.stdout.strip()}; first cell {first_ms:.0f} ms, next {next_ms:.0f} ms",
    )


def isolation_row(gpus: list[Any]) -> None:
    with SandboxExecutor(gpus=0, pool=False) as ex:
        result = ex.run(CodeBlock("python", NODES))
    ok = result.stdout.startswith("['nvidia0']") and "opened" not in result.stdout
    row(
        "a block given GPU 0 sees no other GPU",
        ok,
        f"{len(gpus)} on the host; in the block: {result.stdout.strip()!r}",
    )


def smi_row() -> None:
    with SandboxExecutor(gpus="all", pool=False) as ex:
        result = ex.run(CodeBlock("sh", "nvidia-smi -L"))
    row(
        "nvidia-smi in a block",
        result.exit_code == 0 and "GPU 0" in result.stdout,
        (result.stdout + result.stderr).strip()[:300],
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=100, help="CUDA blocks per mode (default: 100)")
    parser.add_argument("--dry-run", action="store_true", help="print the plan only")
    args = parser.parse_args()
    if args.dry_run:
        print(__doc__)
        print("modes:", ", ".join(f"{m} {o}" for m, o in MODES.items()), f"; {args.blocks} blocks each")
        return 0
    print("| check | result | seen |\n|---|---|---|")
    gpus = host_gpus()
    if not gpus:
        try:
            SandboxExecutor(gpus="all").start()
            row("gpus on a host without a GPU", False, "started: no refusal")
        except BackendUnavailableError as exc:
            row(
                "gpus on a host without a GPU is refused, naming the driver",
                "NVIDIA driver" in str(exc),
                str(exc)[:300],
            )
        row("CUDA checks", None, "no NVIDIA GPU on this host: nothing more to run here")
        return _finish()
    smi = shutil.which("nvidia-smi")
    listed = (
        subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout.strip()
        if smi
        else "no nvidia-smi"
    )
    row("host", True, f"{len(gpus)} GPU(s): {listed[:300]}")
    for mode in MODES:
        cuda_blocks(mode, args.blocks)
    smi_row()
    isolation_row(gpus)
    torch_rows()
    memory_row()
    kernel_row()
    return _finish()


def _finish() -> int:
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "gpu-check.json"), "w") as handle:
            json.dump(
                {"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "rows": rows}, handle, indent=2
            )
    return 1 if any(r["ok"] is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
