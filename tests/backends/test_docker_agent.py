"""The agent in a docker backend's container (``docker/_agent/agent.py``):
blocks go to it, not to ``docker exec``; blocks of one executor run at the
same time; a timeout leaves the container and its agent usable; an agent
that died or stopped is replaced for the next block; output keeps its order
and its cap. On runc, and on gVisor (runsc) where the engine has it. (Speed is
measured by benchmarks/docker_table.py, never asserted here.)"""

from __future__ import annotations

import textwrap
import threading
import time

import pytest

from execbox import CodeBlock, DockerExecutor, Limits
from tests.conftest import require, require_docker


@pytest.fixture(params=["runc", "runsc"])
def runtime(request):
    require_docker()
    if request.param == "runsc":
        from execbox._docker_engine import docker_client

        require(
            "gVisor",
            "runsc" in docker_client().info().get("Runtimes", {}),
            "scripts/docker-engine.sh registers runsc with the engine",
        )
        return "runsc"
    return None


def py(code: str) -> CodeBlock:
    return CodeBlock("python", textwrap.dedent(code))


def test_blocks_go_to_the_agent_not_to_docker_exec(tmp_path, runtime):
    from execbox._docker_engine import docker_client

    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime) as ex:
        for _ in range(3):
            assert ex.run(py("print(1)")).output == "1\n"
        sh = ex.run(CodeBlock("sh", "echo $EXECBOX_RUN_TOKEN | wc -c; pwd"))
        execs = docker_client().api.inspect_container(ex.container_id)["ExecIDs"]
    assert sh.exit_code == 0 and sh.output.split() == ["25", "/workspace"], sh.output
    assert not execs  # not one docker exec, not even the program probe


def test_blocks_of_one_executor_run_at_the_same_time(tmp_path, runtime):
    # each block waits for the other's file: they finish only if both run at once
    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime, limits=Limits(timeout_s=60)) as ex:
        results = {}

        def run(me: str, other: str) -> None:
            results[me] = ex.run(
                py(f"""
                import os, sys, time
                open('{me}', 'w').write('x')
                while not os.path.exists('{other}'):
                    time.sleep(0.01)
                print('{me} saw {other}')
                print('{me} err', file=sys.stderr)
            """)
            )

        threads = [threading.Thread(target=run, args=pair) for pair in (("a", "b"), ("b", "a"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        after = ex.run(py("print('after')"))
    for me, other in (("a", "b"), ("b", "a")):
        assert results[me].exit_code == 0, results[me].output
        assert results[me].stdout == f"{me} saw {other}\n" and results[me].stderr == f"{me} err\n"
    assert after.output == "after\n"


def test_a_timeout_leaves_the_container_and_its_agent_usable(tmp_path, runtime):
    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime, limits=Limits(timeout_s=3)) as ex:
        first = ex.container_id
        slow = ex.run(
            py("""
            import subprocess, time
            subprocess.Popen(['sleep', '300'])
            print('before', flush=True)
            time.sleep(300)
        """)
        )
        after = ex.run(
            py("""
            import os
            names = [open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')[0] for p in os.listdir('/proc')
                     if p.isdigit() and int(p) != os.getpid()]
            print(b'sleep' in names)
        """)
        )
        assert ex.container_id == first
    assert slow.timed_out and slow.exit_code == 124
    assert "before" in slow.output and "Limits.timeout_s" in slow.output
    assert after.exit_code == 0 and after.output == "False\n", after.output


def as_root(ex: DockerExecutor, command: str) -> None:
    """Run ``command`` in the executor's container as its root, the agent's
    real uid (no block can signal the agent: tests/security/test_docker_frames.py);
    its stdin closed, never the host's /dev/null (``_exec.open_exec``)."""
    from execbox._docker_engine import docker_client
    from execbox.backends.docker._exec import open_exec

    _, raw = open_exec(docker_client(), ex.container_id, ["/bin/sh", "-c", command], user="0:0")
    raw.settimeout(10)  # (gVisor: an exec's stream may outlive a container whose agent died)
    try:
        while raw.recv(1 << 16):
            pass
    except OSError:
        pass
    finally:
        raw.close()


def start_in_thread(ex: DockerExecutor, block: CodeBlock, results: dict, name: str) -> threading.Thread:
    """Run ``block`` in a thread (its result in ``results[name]``) and wait until it printed."""
    started = threading.Event()
    thread = threading.Thread(
        target=lambda: results.__setitem__(name, ex.run(block, on_output=lambda stream, text: started.set()))
    )
    thread.start()
    assert started.wait(30), "the block did not start"
    return thread


def test_an_agent_that_dies_is_replaced_for_the_next_block(tmp_path, runtime):
    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime) as ex:
        first = ex.container_id
        ex.run(CodeBlock("sh", "echo kept > /tmp/note"))
        results: dict = {}
        thread = start_in_thread(
            ex, py("import time; print('up', flush=True); time.sleep(60)"), results, "running"
        )
        as_root(ex, f"kill -KILL {ex._link.info['pid']}")  # as the OOM killer would
        thread.join(timeout=30)
        after = ex.run(py("import os; print('hello', os.path.exists('/tmp/note'))"))
        second = ex.container_id
    running = results["running"]
    assert running.exit_code == 137 and running.error is not None and running.error.name == "ContainerDied"
    assert "agent" in running.output
    assert after.exit_code == 0 and after.output == "hello False\n", after.output
    assert second != first


def test_output_order_and_cap(tmp_path, runtime):
    limits = Limits(max_output_bytes=10_000)
    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime, limits=limits) as ex:
        ordered = ex.run(
            py("""
            import sys, time
            for i in range(3):
                print('out', i, flush=True)
                time.sleep(0.05)
                print('err', i, file=sys.stderr, flush=True)
                time.sleep(0.05)
        """)
        )
        big = ex.run(py("print('x' * 1_000_000); print('end')"))
        shell = ex.run(CodeBlock("sh", "echo one; sleep 0.05; echo two >&2; sleep 0.05; echo three"))
    assert ordered.output == "".join(f"out {i}\nerr {i}\n" for i in range(3))
    assert big.exit_code == 0 and big.truncated and len(big.output) < 20_000
    assert shell.output == "one\ntwo\nthree\n"


def test_a_python_block_is_a_fresh_main(tmp_path, runtime):
    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime) as ex:
        ex.run(py("x = 1\nimport sys\nsys.modules['planted'] = 1"))
        again = ex.run(
            py("""
            import sys
            print('x' in globals(), 'planted' in sys.modules, __name__, sys.argv[0].endswith('.py'))
            for name in ('wire', 'killer', 'ipc_sweep', 'run_file'):
                assert name not in sys.modules, name
        """)
        )
    assert again.exit_code == 0 and again.output == "False False __main__ True\n", again.output


def test_an_image_without_python3_runs_blocks_as_docker_exec(tmp_path, runtime):
    # python3 out of reach (PATH holds only sh, sleep and cat): the keep-alive
    # runs, no agent, and blocks go by docker exec as before
    programs = tmp_path / "bin"
    programs.mkdir()
    programs.chmod(0o755)
    for name in ("sh", "sleep", "cat"):
        (programs / name).symlink_to(f"/bin/{name}")
    with DockerExecutor(
        workspace=tmp_path / "ws",
        runtime=runtime,
        env={"PATH": "/opt/bin"},
        volumes={str(programs): {"bind": "/opt/bin", "mode": "ro"}},
    ) as ex:
        result = ex.run(CodeBlock("sh", "echo by exec; echo $EXECBOX_RUN_TOKEN | cat"))
        languages = ex.capabilities.languages
    assert result.exit_code == 0 and result.output.splitlines()[0] == "by exec", result.output
    assert len(result.output.splitlines()[1]) == 24
    assert languages == ("sh",)


def test_a_slow_on_output_neither_holds_a_block_past_its_timeout_nor_queues_its_output(tmp_path, runtime):
    # `yes` outruns a callback of 1 ms a chunk: the agent sends no more than its window ahead of what
    # the host consumed, and the block's thread looks at its deadline between slices of its queue
    import os

    def rss_mb() -> float:
        with open(f"/proc/{os.getpid()}/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("VmRSS:")) / 1024

    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime, limits=Limits(timeout_s=2)) as ex:
        before = rss_mb()
        started = time.monotonic()
        flood = ex.run(
            CodeBlock("sh", "yes 0123456789abcdef"), on_output=lambda stream, text: time.sleep(0.001)
        )
        took = time.monotonic() - started
        grew = rss_mb() - before
        after = ex.run(py("print('after')"))
    assert flood.timed_out and flood.exit_code == 124
    assert took < 2 + 2 + 3, took  # the timeout, the drain, slack for a loaded machine (was: never)
    assert grew < 32, f"the host's RSS grew by {grew:.0f} MB"
    assert after.output == "after\n"


def test_a_stopped_agent_is_replaced_and_a_block_it_never_took_runs_in_a_new_container(tmp_path, runtime):
    # the agent stopped (SIGSTOP, as root: no block can signal it) while a block runs: the block sent
    # after it is not answered within ANSWER_S; the container is killed and that block runs in a new one
    from execbox.backends.docker._link import ANSWER_S

    with DockerExecutor(workspace=tmp_path / "ws", runtime=runtime, limits=Limits(timeout_s=120)) as ex:
        first = ex.container_id
        results: dict = {}
        thread = start_in_thread(ex, CodeBlock("sh", "echo up; sleep 300"), results, "running")
        as_root(ex, f"kill -STOP {ex._link.info['pid']}")
        started = time.monotonic()
        waiting = ex.run(py("print('ran')"))
        took = time.monotonic() - started
        thread.join(timeout=60)
        after = ex.run(py("print('after')"))
        second = ex.container_id
    assert waiting.exit_code == 0 and waiting.output.endswith("ran\n"), waiting.output
    assert "new one was started for this block" in waiting.output
    assert took < ANSWER_S + 20, took  # (was: its whole timeout, 120 s)
    stopped = results["running"]
    assert stopped.exit_code == 137 and stopped.error is not None and stopped.error.name == "ContainerDied"
    assert "stopped answering" in stopped.output
    assert after.output == "after\n" and second != first


def test_an_agent_that_left_before_the_attach_is_still_heard():
    # Under load the agent may refuse (and leave) before the host attaches to its stream: its
    # word then comes from the engine's log, bounded, rather than "no word" or a bare timeout
    require_docker()
    from execbox._docker_engine import docker_client
    from execbox.backends.docker._link import AgentLink, ContainerGone
    from execbox.environments import DockerPython

    client = docker_client()
    image = DockerPython().build(lambda *_: None)
    said = "execbox-agent: the agent could not take its identity (a stand-in)"
    container = client.containers.run(
        image,
        ["sh", "-c", f"head -c 20000 /dev/zero | tr '\\0' x >&2; echo >&2; echo '{said}' >&2"],
        detach=True,
        stdin_open=True,
    )
    try:
        container.wait(timeout=60)
        with pytest.raises(ContainerGone) as gone:
            AgentLink(client, container.id).handshake(timeout_s=2)
        assert said in str(gone.value) and len(str(gone.value)) < 4096 + 200
    finally:
        container.remove(force=True)
