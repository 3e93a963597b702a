"""GPUs in the sandbox, on a host without one: ``gpus=`` parsed and
refused clearly, the host's GPUs read from a folder of device nodes the
test makes (``tests/_fake_gpus.py``), and each way a block runs (one-shot,
pooled, stateful) given exactly the chosen nodes.
CUDA itself needs a GPU host: ``scripts/gpu-check.sh``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from execbox import BackendUnavailableError, CodeBlock, ConfigurationError, Limits, SandboxExecutor, _gpus
from execbox._gpus import GpuHost, grant, host_gpus, parse_gpus
from execbox.jail import _gpu as sandbox_gpu
from tests._fake_gpus import UUID0, fake_gpu_host
from tests.conftest import require, require_namespaces


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        (None, None),
        ("", None),
        ("all", ("all",)),
        (0, ("0",)),
        ("0,1", ("0", "1")),
        ([1, "0", 1], ("1", "0")),
        (UUID0, (UUID0,)),
        (["all"], ("all",)),
    ],
)
def test_gpus_values(value, parsed):
    assert parse_gpus(value) == parsed


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (True, "ambiguous"),
        (-1, "neither a GPU index"),
        ("gpu0", "neither a GPU index"),
        (["all", 0], "stands alone"),
        ([], "between 1 and"),
        (1.5, "None, 'all', an index"),
        ([None], "each GPU is an index"),
    ],
)
def test_bad_gpus_values_say_what_to_pass(value, says):
    with pytest.raises(ConfigurationError, match=says):
        parse_gpus(value)


@pytest.fixture
def fake_host():
    with fake_gpu_host() as host:
        yield host


def test_the_host_gpus_come_from_character_devices_and_the_driver(fake_host):
    gpus = host_gpus(fake_host)
    assert [(g.index, g.uuid, g.model) for g in gpus] == [(0, UUID0, "NVIDIA H200"), (1, "", "")]
    assert fake_host.driver_version() == "580.95.05"


def test_a_grant_binds_the_chosen_gpu_and_the_shared_nodes_only(fake_host):
    given = grant(UUID0, fake_host)
    assert given is not None
    inside = [node for _, node in given.nodes]
    assert inside == ["/dev/nvidia0", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-caps/nvidia-cap1"]
    assert dict(given.env) == {"NVIDIA_VISIBLE_DEVICES": UUID0, "CUDA_VISIBLE_DEVICES": UUID0}
    both = grant("all", fake_host)
    assert both is not None and [g.index for g in both.gpus] == [0, 1]
    assert "CUDA_VISIBLE_DEVICES" not in dict(both.env)  # GPU 1's UUID is unknown: no guess by index


def test_a_gpu_the_host_has_not_is_refused_naming_those_it_has(fake_host):
    with pytest.raises(ConfigurationError, match=r"no GPU '3'; it has 0 \(GPU-1111.*\), 1"):
        grant([0, 3], fake_host)


def test_gpus_on_a_host_without_any_names_the_driver(tmp_path):
    empty = GpuHost(dev=str(tmp_path), driver=str(tmp_path / "none"))
    with pytest.raises(
        BackendUnavailableError, match=r"no NVIDIA GPU .*install the NVIDIA driver.*nvidia-smi"
    ):
        grant("all", empty)
    with pytest.raises(BackendUnavailableError, match="nvidia-smi"):
        SandboxExecutor(gpus="all", workspace=tmp_path / "ws").start()


def test_a_driver_outside_the_system_folders_is_bound_and_found(tmp_path, monkeypatch):
    smi_dir = tmp_path / "nvidia" / "bin"
    smi_dir.mkdir(parents=True)
    (smi_dir / "nvidia-smi").write_text("#!/bin/sh\n")
    (smi_dir / "nvidia-smi").chmod(0o755)
    monkeypatch.setattr(_gpus, "_loader_folders", lambda: ("/opt/driver/lib", "/usr/lib/x86_64-linux-gnu"))
    readonly, libraries, bins = _gpus._driver_files(GpuHost(search_path=str(smi_dir)))
    assert readonly == ["/opt/driver/lib", str(smi_dir)] and bins == [str(smi_dir)]
    assert libraries == []  # the loader's cache finds them
    given = _gpus.GpuGrant(gpus=(), nodes=(), bin_path=(str(smi_dir),), library_path=("/opt/driver/lib",))
    env = sandbox_gpu.gpu_environment({"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/mine"}, given)
    assert env["PATH"] == f"/usr/bin:{smi_dir}" and env["LD_LIBRARY_PATH"] == "/opt/driver/lib:/mine"


PROBE = textwrap.dedent(
    """
    import os, subprocess
    nodes = sorted(os.path.join(d, n)[5:] for d, _, ns in os.walk('/dev') for n in ns if 'nvidia' in n)
    print(nodes, os.environ.get('CUDA_VISIBLE_DEVICES'), os.environ.get('NVIDIA_VISIBLE_DEVICES'))
    with open('/dev/nvidia0', 'r+b') as gpu:  # what CUDA does first: open the node, read and write
        gpu.write(b'x')
        print('opened', gpu.read(1))
    """
)


@pytest.mark.parametrize("mode", ["one-shot", "pool", "stateful"])
def test_a_block_sees_exactly_the_chosen_gpu(fake_host, tmp_path, mode):
    require_namespaces()  # asserted below
    options = {"one-shot": {"pool": False}, "pool": {}, "stateful": {"stateful": True}}[mode]
    with SandboxExecutor(gpus=0, workspace=tmp_path / "ws", **options) as ex:
        result = ex.run(CodeBlock("python", PROBE))
        assert ex.isolation_in_use == "namespaces"
        mechanism = ex.capabilities.mechanisms["gpus"]
    assert result.exit_code == 0, result.stderr
    first, second = result.stdout.splitlines()
    expected = ["nvidia-caps/nvidia-cap1", "nvidia-uvm", "nvidia0", "nvidiactl"]
    assert first == f"{expected} {UUID0} 0"  # never nvidia1: another GPU's node is not there to open
    assert second == "opened b''"
    assert mechanism.startswith(f"GPU 0 ({UUID0}): only their device nodes bound")


SLEEPERS = """
def sleepers():
    found = []
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            found.append(open(f'/proc/{pid}/cmdline', 'rb').read().split(b'\\0')[0])
        except OSError:
            pass
    return [c for c in found if c == b'sleep']
"""


def test_the_gpu_session_keeps_its_state_and_kills_what_each_cell_started(fake_host, tmp_path):
    require_namespaces()  # stateful=True
    # no PID namespace of its own (the driver refuses a nested one): the session's own sweep and
    # its init stand in, and must not reach the zygote (kill(-1) would)
    with SandboxExecutor(gpus="all", stateful=True, workspace=tmp_path / "ws") as ex:
        first = ex.run(CodeBlock("python", "x = 41\nimport subprocess, os\nprint(os.getpid())"))
        started = ex.run(
            CodeBlock(
                "python",
                "p = subprocess.Popen(['sleep', '3017'], start_new_session=True)\n"
                "q = subprocess.Popen(['sh', '-c', '(sleep 3018 &) ; sleep 3019'])\nx += 1\nprint(x)",
            )
        )
        after = ex.run(CodeBlock("python", SLEEPERS + "print(x, sleepers())\nprint(os.getpid())"))
        health = ex.pool_health
        ex.restart()
        fresh = ex.run(CodeBlock("python", "print('x' in dir())"))
    assert first.exit_code == 0 and int(first.stdout) > 2  # not PID 2 of a namespace of its own
    assert started.stdout == "42\n"
    assert after.stdout.splitlines() == ["42 []", first.stdout.strip()]
    assert health is not None and health["zygote_restarts"] == 0
    assert fresh.stdout == "False\n"
    left = subprocess.run(["pgrep", "-f", "^sleep 301[789]$"], capture_output=True, text=True).stdout
    assert left == ""


def test_gpu_blocks_get_no_address_space_limit(fake_host, tmp_path):
    ex = SandboxExecutor(gpus=0, cgroups=False, workspace=tmp_path / "ws")
    assert "AS" not in ex._rlimits()
    with ex:
        caps = ex.capabilities
    assert "memory_mb" not in caps.enforced and "CUDA" in caps.gaps["memory_mb"]
    assert "AS" in SandboxExecutor(cgroups=False, workspace=tmp_path / "ws2")._rlimits()


def test_the_gpu_check_script_runs_here_and_says_there_is_no_gpu(tmp_path):
    if _gpus.host_gpus():
        pytest.skip("this host has a GPU: run scripts/gpu-check.sh itself")
    script = Path(__file__).resolve().parents[2] / "scripts" / "gpu-check.sh"
    plan = subprocess.run([script, "--dry-run"], capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0 and "100 blocks each" in plan.stdout
    done = subprocess.run(
        [script], capture_output=True, text=True, timeout=120, env={**os.environ, "OUT": str(tmp_path)}
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads((tmp_path / "gpu-check.json").read_text())["rows"]
    assert [r["ok"] for r in rows] == [True, None] and "install the NVIDIA driver" in rows[0]["seen"]


def test_the_jailed_jupyter_kernel_gets_exactly_the_chosen_gpu(fake_host, tmp_path):
    from execbox import JupyterExecutor
    from tests.backends.test_jupyter import require_jupyter

    require_jupyter("sandbox")
    with JupyterExecutor(gpus=0, workspace=tmp_path / "ws") as ex:
        result = ex.run(CodeBlock("python", PROBE))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"['nvidia-caps/nvidia-cap1', 'nvidia-uvm', 'nvidia0', 'nvidiactl'] {UUID0} 0",
        "opened b''",
    ]
    with pytest.raises(ConfigurationError, match="kernel='sandbox'"):
        JupyterExecutor(gpus=0, kernel="local")


def test_preload_with_gpus_points_at_the_stateful_session():
    with pytest.raises(ConfigurationError, match="use stateful=True to keep modules imported"):
        SandboxExecutor(gpus=0, preload=["json"])
    SandboxExecutor(gpus=0, preload=["json"], stateful=True).close()


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory):
    """libnvidia-ml.so.1 built from tests/fixtures/nvml/fake_nvml.c (NVML's calls,
    processes named gpu-hog-<MB> holding <MB>), for a process started with it."""
    gcc = shutil.which("gcc")
    require("gcc", gcc is not None, "apt-get install gcc (the fake NVML library is built with it)")
    folder = tmp_path_factory.mktemp("nvml")
    source = Path(__file__).resolve().parents[1] / "fixtures" / "nvml" / "fake_nvml.c"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", folder / "libnvidia-ml.so.1", source], check=True)
    return folder


def require_cgroups() -> None:
    from execbox.jail._cgroups import cgroup_support

    support, why = cgroup_support()
    require(
        "a cgroup per block", support is not None, f"gpu_memory_mb reads a block's processes there: {why}"
    )


@pytest.mark.parametrize("mode", ["one-shot", "pool", "stateful"])
def test_gpu_memory_past_the_limit_kills_the_block_and_names_the_limit(fake_nvml, mode):
    require_cgroups()
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, str(root / "tests" / "fixtures" / "nvml" / "gpu_memory_run.py"), mode],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=root,
        env={**os.environ, "LD_LIBRARY_PATH": str(fake_nvml), "PYTHONPATH": f"{root}:{root / 'src'}"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    under, over = (json.loads(line) for line in done.stdout.splitlines())
    assert under["held"] and (under["exit_code"], under["error"]) == (0, None)
    assert over["error"] == "GpuMemoryLimit" and over["exit_code"] != 0
    assert "GPU memory limit 1024 MB exceeded (Limits.gpu_memory_mb)" in over["message"]
    assert over["seconds"] < 10  # killed while it held the GPU, not at its end (15 s) or the timeout


def test_gpu_memory_limit_without_nvml_is_a_named_gap(fake_host, tmp_path):
    require_cgroups()
    with pytest.warns(UserWarning, match=r"cannot enforce Limits gpu_memory_mb here: .*NVML"):
        ex = SandboxExecutor(gpus=0, limits=Limits(gpu_memory_mb=512), pool=False, workspace=tmp_path / "ws")
        ex.start()
    try:
        assert "NVML" in ex.capabilities.gaps["gpu_memory_mb"]
        assert "gpu_memory_mb" not in ex.capabilities.enforced
    finally:
        ex.close()
