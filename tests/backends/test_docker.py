"""The docker backend against the real engine: hardened defaults, limits,
process clean-up inside the container, the container's life cycle, options
and errors. (The shared behaviour is in tests/contract.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest

from execbox import BackendUnavailableError, CodeBlock, ConfigurationError, DockerExecutor, Limits, Workspace
from tests.conftest import require_docker

pytestmark = pytest.mark.usefixtures("docker_ready")


@pytest.fixture
def docker_ready():
    require_docker()


@pytest.fixture
def client():
    from execbox._docker_engine import docker_client

    return docker_client()


def py(code: str) -> CodeBlock:
    return CodeBlock("python", textwrap.dedent(code))


def container_processes(client, container_id: str) -> list[str]:
    """Command lines of the container's processes, seen from a fresh exec
    (minus that exec itself)."""
    out = client.api.exec_start(
        client.api.exec_create(
            container_id,
            [
                "python3",
                "-c",
                (
                    "import os\n"
                    "for p in os.listdir('/proc'):\n"
                    "    if p.isdigit() and int(p) != os.getpid():\n"
                    "        print(open('/proc/%s/cmdline' % p, 'rb').read().replace(b'\\0', b' ').decode().strip())"
                ),
            ],
        )["Id"]
    )
    return [line for line in out.decode().splitlines() if line]


def test_hardened_by_default(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws") as ex:
        result = ex.run(
            py("""
            import os, socket
            status = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines())
            print('uid', os.getuid(), 'for-good', len(set(os.getresuid())) == len(set(os.getresgid())) == 1)
            print('nnp', status['NoNewPrivs'].strip(), 'capeff', status['CapEff'].strip())
            print('capprm', status['CapPrm'].strip(), 'capbnd', status['CapBnd'].strip())
            print('nets', sorted(os.listdir('/sys/class/net')))
            for path in ('/etc/evil', '/tmp/ok'):
                try:
                    open(path, 'w').write('x'); print(path, 'written')
                except OSError as exc:
                    print(path, type(exc).__name__)
        """)
        )
        attrs = client.api.inspect_container(ex.container_id)
    assert result.exit_code == 0, result.output
    assert "uid 0" not in result.output
    assert "nnp 1 capeff 0000000000000000" in result.output
    assert "capprm 0000000000000000 capbnd 0000000000000000" in result.output
    assert "for-good True" in result.output  # real, effective and saved ids: the block user's alone
    assert "nets ['lo']" in result.output
    assert "/etc/evil OSError" in result.output and "/tmp/ok written" in result.output
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none" and host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and "no-new-privileges" in host["SecurityOpt"]
    # the agent's container: root, to run blocks under another uid than its own, and no more
    assert attrs["Config"]["User"] == "0:0" and sorted(host["CapAdd"]) == ["SETGID", "SETPCAP", "SETUID"]
    assert host["Memory"] > 0 and host["PidsLimit"] > 0


def test_limits_reach_the_container(tmp_path, client):
    limits = Limits(timeout_s=20, memory_mb=300, max_processes=40, cpus=0.5, network=True)
    with DockerExecutor(workspace=tmp_path / "ws", limits=limits) as ex:
        host = client.api.inspect_container(ex.container_id)["HostConfig"]
        result = ex.run(CodeBlock("sh", "ls /sys/class/net"))
    assert host["Memory"] == 300 * 1024 * 1024 and host["MemorySwap"] == 300 * 1024 * 1024
    assert host["PidsLimit"] == 40 + 2  # plus init and the agent
    assert host["NanoCpus"] == 500_000_000
    assert host["NetworkMode"] == "bridge"
    assert "eth0" in result.output


def test_timeout_kills_the_tree_inside_the_container(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=3)) as ex:
        result = ex.run(
            CodeBlock(
                "sh",
                textwrap.dedent("""
            sleep 301 &
            setsid sh -c 'sleep 302' &
            python3 -c 'import os, time
            if os.fork() == 0:
                os.setsid(); os.environ.clear(); time.sleep(303)' &
            echo started
            sleep 300
        """),
            )
        )
        left = container_processes(client, ex.container_id)
        after = ex.run(py("print('next')"))
    assert result.exit_code == 124 and result.timed_out
    assert result.output.startswith("started\n") and "Limits.timeout_s" in result.output
    assert not [line for line in left if "sleep 30" in line], left
    assert after.output == "next\n"


def test_no_process_outlives_a_finished_block(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws") as ex:
        result = ex.run(CodeBlock("sh", "sleep 311 & (setsid sleep 312 &) ; echo done"))
        left = container_processes(client, ex.container_id)
    assert result.output == "done\n"
    assert not [line for line in left if "sleep 31" in line], left
    assert len(left) == 2, left  # docker's init and the keep-alive


def test_memory_limit_is_reported(tmp_path):
    with DockerExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=30, memory_mb=128)) as ex:
        result = ex.run(
            py("x = bytearray(400 * 1024 * 1024); x[::4096] = b'y' * len(x[::4096]); print('no')")
        )
        after = ex.run(py("print('alive')"))
    assert result.error is not None and result.error.name == "MemoryLimit", result.output
    assert "Limits.memory_mb" in result.output
    assert after.output == "alive\n"


def test_fork_bomb_is_contained(tmp_path):
    with DockerExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=5, max_processes=30)) as ex:
        result = ex.run(CodeBlock("sh", "bomb() { bomb | bomb & }; bomb; sleep 60"))
        after = ex.run(py("print('alive')"))
    assert result.exit_code != 0
    assert after.output == "alive\n"


def test_close_stops_the_container_before_the_workspace_goes(tmp_path, client):
    ex = DockerExecutor(limits=Limits(timeout_s=60))
    ex.start()
    container_id, folder = ex.container_id, ex.workspace.path
    results = []
    worker = threading.Thread(
        target=lambda: results.append(ex.run(CodeBlock("sh", "while :; do date > t; done")))
    )
    worker.start()
    time.sleep(1.0)
    ex.close()
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert results and results[0].exit_code != 0
    assert not folder.exists()
    import docker

    try:
        running = client.api.inspect_container(container_id)["State"]["Running"]
    except docker.errors.NotFound:
        running = False  # stopped and removed (auto_remove)
    assert not running


def test_container_of_a_killed_host_is_reaped(tmp_path, client):
    script = (
        "import sys, time; from execbox import DockerExecutor\n"
        "ex = DockerExecutor(); ex.start(); print(ex.container_id, flush=True); time.sleep(600)"
    )
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    container_id = host.stdout.readline().strip()
    host.kill()
    host.wait()
    assert client.api.inspect_container(container_id)["State"]["Running"]  # nobody stopped it
    from execbox.backends.docker import _container as _docker_container

    _docker_container._reaped.clear()  # a new process would reap on its first start
    with DockerExecutor(workspace=tmp_path / "ws"):
        pass
    with pytest.raises(Exception, match=r"No such container|404"):
        client.api.inspect_container(container_id)


def test_reaping_survives_a_container_removed_while_it_lists(client, monkeypatch):
    # Other processes create and remove execbox containers all the time: one that goes between
    # the reaper's list and its look at each container must not stop the orphans' removal
    import socket

    from execbox.backends.docker import _container as _docker_container
    from execbox.environments import DockerPython

    image = DockerPython().build(lambda *_: None)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    orphan_label = f"{socket.gethostname()}:{dead.pid}:never-started"
    labels = {_docker_container.LABEL_OWNER: orphan_label}
    orphans = [client.containers.create(image, ["true"], labels=labels) for _ in range(2)]
    passing = client.containers.create(
        image, ["true"], labels={_docker_container.LABEL_OWNER: _docker_container.owner_label()}
    )
    inspect = client.api.inspect_container

    def another_process_removes_one(container_id):
        try:
            client.api.remove_container(passing.id, force=True)
        except Exception:  # noqa: BLE001 - removed by the first call already
            pass
        return inspect(container_id)

    monkeypatch.setattr(client.api, "inspect_container", another_process_removes_one)
    monkeypatch.setattr(_docker_container, "_reaped", set())
    try:
        _docker_container.reap_orphans(client)
        left = [c.id for c in orphans if client.api.containers(all=True, filters={"id": c.id})]
        assert not left, f"orphans left behind: {left}"
    finally:
        for container in [*orphans, passing]:
            try:
                client.api.remove_container(container.id, force=True)
            except Exception:  # noqa: BLE001 - already gone
                pass


def test_env_pass_env_and_volumes(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "data.txt").write_text("from the host\n")
    monkeypatch.setenv("EXECBOX_TEST_PASSED", "yes")
    monkeypatch.delenv("EXECBOX_TEST_MISSING", raising=False)
    ex = DockerExecutor(
        workspace=tmp_path / "ws",
        env={"GREETING": "hi"},
        pass_env=["EXECBOX_TEST_PASSED", "EXECBOX_TEST_MISSING"],
        volumes=[f"{shared}:/data:ro"],
    )
    with pytest.warns(UserWarning, match="EXECBOX_TEST_MISSING"), ex:
        result = ex.run(
            CodeBlock(
                "sh",
                "echo $GREETING $EXECBOX_TEST_PASSED; cat /data/data.txt; "
                "(echo x > /data/new) 2>/dev/null || echo read-only",
            )
        )
    assert result.output == "hi yes\nfrom the host\nread-only\n"


def test_container_create_kwargs_override_warns(tmp_path, client):
    ex = DockerExecutor(
        workspace=tmp_path / "ws", container_create_kwargs={"network_mode": "bridge", "hostname": "box"}
    )
    with pytest.warns(UserWarning, match="network_mode"), ex:
        result = ex.run(CodeBlock("sh", "hostname"))
        mode = client.api.inspect_container(ex.container_id)["HostConfig"]["NetworkMode"]
    assert result.output == "box\n" and mode == "bridge"


def test_restart_gives_a_new_container_and_keeps_the_workspace(tmp_path):
    with DockerExecutor(workspace=tmp_path / "ws") as ex:
        ex.run(CodeBlock("sh", "echo kept > kept.txt; echo lost > /tmp/lost.txt"))
        first = ex.container_id
        ex.restart()
        result = ex.run(CodeBlock("sh", "cat kept.txt; cat /tmp/lost.txt 2>/dev/null || echo gone"))
        assert ex.container_id != first
    assert result.output == "kept\ngone\n"


def test_a_container_killed_from_outside(tmp_path, client):
    with DockerExecutor(workspace=tmp_path / "ws", limits=Limits(timeout_s=30)) as ex:
        ex.run(py("print(1)"))
        container_id = ex.container_id
        threading.Timer(1.0, lambda: client.api.kill(container_id)).start()
        during = ex.run(CodeBlock("sh", "echo before; sleep 20"))
        after = ex.run(py("print('again')"))
        assert ex.container_id != container_id, (during, after)
        client.api.kill(ex.container_id)  # between blocks this time
        time.sleep(0.5)
        between = ex.run(py("print('once more')"))
    assert during.exit_code == 137 and during.error.name == "ContainerDied", during.output
    assert during.output.startswith("before\n")
    assert after.output == "again\n"
    assert between.exit_code == 0 and "a new one was started" in between.output
    assert between.output.endswith("once more\n")


def test_engine_unreachable_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(BackendUnavailableError) as info:
        with DockerExecutor(workspace=tmp_path / "ws"):
            pass
    message = str(info.value)
    assert f"Docker is not reachable at unix://{tmp_path}/no.sock" in message
    assert "make docker" in message and "backend='sandbox'" in message


def test_missing_image_says_how_to_build_it(tmp_path):
    with pytest.raises(BackendUnavailableError) as info:
        with DockerExecutor(workspace=tmp_path / "ws", image="execbox/nothing-here:1"):
            pass
    message = str(info.value)
    assert "'execbox/nothing-here:1' is not available locally and could not be pulled" in message
    assert "execbox images build" in message


def test_unknown_runtime_names_the_setting(tmp_path):
    with pytest.raises(BackendUnavailableError, match="no runtime 'nope'"):
        with DockerExecutor(workspace=tmp_path / "ws", runtime="nope"):
            pass


def test_gvisor_runtime(tmp_path, client):
    runtimes = client.info().get("Runtimes", {})
    from tests.conftest import require

    require("gVisor", "runsc" in runtimes, "scripts/docker-engine.sh registers runsc with the engine")
    with DockerExecutor(workspace=tmp_path / "ws", runtime="runsc", limits=Limits(timeout_s=10)) as ex:
        kernel = ex.run(CodeBlock("sh", "dmesg 2>/dev/null | head -1; echo hi > f.txt; cat f.txt"))
        timeout = ex.run(
            CodeBlock("sh", "sleep 300 & echo started; sleep 300"),
        )
        after = ex.run(py("print('next')"))
    assert "gVisor" in kernel.output and kernel.output.endswith("hi\n")
    assert "f.txt" in kernel.files
    assert timeout.exit_code == 124 and timeout.output.startswith("started\n")
    assert after.output == "next\n"


def test_warnings_are_quiet_by_default(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with DockerExecutor(workspace=Workspace(tmp_path / "ws")) as ex:
            assert ex.run(py("print('quiet')")).output == "quiet\n"
    assert os.path.isdir(tmp_path / "ws")  # a given workspace stays


def test_gpus_are_asked_of_the_engine_and_a_refusal_names_the_toolkit(tmp_path, client):
    # an engine without NVIDIA's runtime (CI's): the request reaches it and its refusal is explained
    from execbox.backends.docker._container import gpu_requests

    if "nvidia" in (client.info().get("Runtimes") or {}):
        pytest.skip("this engine has NVIDIA's runtime: scripts/gpu-check.sh runs GPU blocks in it")

    (every,) = gpu_requests(("all",))
    (some,) = gpu_requests(("0", "GPU-1"))
    assert (every["Count"], every["Capabilities"]) == (-1, [["gpu"]])
    assert (some["DeviceIDs"], some["Capabilities"]) == (["0", "GPU-1"], [["gpu"]])
    with pytest.raises(
        BackendUnavailableError, match=r"cannot give the container a GPU .*NVIDIA Container Toolkit"
    ):
        DockerExecutor(gpus="all", workspace=tmp_path / "ws").start()
    with pytest.raises(ConfigurationError, match="gpus= or device_requests="):
        DockerExecutor(gpus=0, device_requests=[some])
