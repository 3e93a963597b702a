"""The Jupyter backend through a real Kernel Gateway (``jupyter kernelgateway``
started by LocalJupyterServer): one server, many executors, each with a
kernel of its own; auth; timeouts, deaths and restarts over REST +
WebSocket; the server gone with its host."""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import textwrap

import pytest

from execbox import (
    BackendUnavailableError,
    CodeBlock,
    JupyterConnectionInfo,
    JupyterExecutor,
    Limits,
    LocalJupyterServer,
)
from tests.conftest import process_alive, require, wait_dead


def require_gateway() -> None:
    found = all(importlib.util.find_spec(m) for m in ("kernel_gateway", "websocket", "ipykernel"))
    require("kernel gateway", found, "pip install 'execbox[gateway]' (./dev.sh does)")


@pytest.fixture(scope="module")
def server():
    require_gateway()
    with LocalJupyterServer() as running:
        yield running


@pytest.fixture
def gateway(server, tmp_path):
    with JupyterExecutor(workspace=tmp_path / "ws", kernel=server, limits=Limits(timeout_s=5)) as ex:
        yield ex


def py(code: str) -> CodeBlock:
    return CodeBlock("python", code)


def test_one_server_many_executors_each_with_its_own_kernel(server, tmp_path):
    with (
        JupyterExecutor(workspace=tmp_path / "a", kernel=server) as a,
        JupyterExecutor(workspace=tmp_path / "b", kernel=server) as b,
    ):
        a.run(py("mine = 'a'"))
        assert b.run(py("print('mine' in globals())")).output == "False\n"
        assert a.run(py("print(mine)")).output == "a\n"
        listed = {k["id"] for k in server.connection_info.request("GET", "/api/kernels")}
        assert {a._kernel.kernel_id, b._kernel.kernel_id} <= listed
        gone = a._kernel.kernel_id
    listed = {k["id"] for k in server.connection_info.request("GET", "/api/kernels")}
    assert gone not in listed, "close() deletes the executor's kernel on the server"


def test_files_plots_and_shell_blocks_land_in_the_workspace(gateway):
    result = gateway.run(py("import os\nopen('made.txt', 'w').write('x')\nprint(os.getcwd())"))
    assert result.output == f"{gateway.workspace.path}\n" and "made.txt" in result.files
    plot = gateway.run(py("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()"))
    assert [d.mime_type for d in plot.displays] == ["image/png", "text/plain"], plot.output
    shell = gateway.run(CodeBlock("sh", "echo out; echo err >&2; exit 4"))
    assert (shell.exit_code, shell.stdout, shell.stderr) == (4, "out\n", "err\n")


def test_a_timeout_interrupts_over_rest_and_keeps_state(gateway):
    gateway.run(py("kept = 41"))
    result = gateway.run(py("import time\nprint('started', flush=True)\ntime.sleep(60)"))
    assert result.timed_out and result.exit_code == 124 and result.output.startswith("started\n")
    assert gateway.run(py("print(kept + 1)")).output == "42\n"


def test_a_dead_kernel_is_reported_and_the_next_block_works(gateway):
    gateway.run(py("lost = 1"))
    result = gateway.run(py("import os\nos._exit(3)"))
    assert result.exit_code == 137 and result.error is not None and result.error.name == "KernelDied"
    assert gateway.run(py("print('alive', 'lost' in globals())")).output == "alive False\n"


def test_restart_clears_state(gateway):
    gateway.run(py("gone = 1"))
    gateway.restart()
    assert gateway.run(py("print('gone' in globals())")).output == "False\n"


def test_a_server_that_does_not_share_our_files_gets_shell_code_as_text(server, tmp_path):
    info = server.connection_info
    remote = JupyterConnectionInfo(info.host, info.port, token=info.token)  # as if on another machine
    with JupyterExecutor(workspace=tmp_path / "ws", kernel=remote) as ex:
        result = ex.run(CodeBlock("bash", "echo from bash $((6 * 7))"))
        assert result.output == "from bash 42\n", result.output


def test_a_wrong_token_is_refused_with_a_clear_error(server, tmp_path):
    info = server.connection_info
    wrong = JupyterConnectionInfo(info.host, info.port, token="not-the-token")
    with pytest.raises(BackendUnavailableError, match="refused the token"):
        JupyterExecutor(workspace=tmp_path / "ws", kernel=wrong).start()


def test_no_server_at_the_address_is_a_clear_error(tmp_path):
    require_gateway()
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    with pytest.raises(BackendUnavailableError, match="no Jupyter server answers"):
        JupyterExecutor(workspace=tmp_path / "ws", kernel=JupyterConnectionInfo("127.0.0.1", port)).start()


def test_stop_and_a_killed_host_leave_no_gateway_or_kernel(tmp_path):
    require_gateway()
    host = textwrap.dedent(f"""
        import time
        from execbox import CodeBlock, JupyterExecutor, LocalJupyterServer
        server = LocalJupyterServer().start()
        ex = JupyterExecutor(workspace={str(tmp_path / "ws")!r}, kernel=server)
        pid = ex.run(CodeBlock("python", "import os; print(os.getpid())")).output.strip()
        print(server.pid, pid, flush=True)
        time.sleep(120)
    """)
    proc = subprocess.Popen([sys.executable, "-c", host], stdout=subprocess.PIPE, text=True)
    try:
        gateway_pid, kernel_pid = (int(p) for p in proc.stdout.readline().split())
        assert process_alive(gateway_pid) and process_alive(kernel_pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert wait_dead([gateway_pid, kernel_pid], timeout=15) == []

    with LocalJupyterServer() as server:
        pid = server.pid
        assert pid is not None and process_alive(pid)
    assert wait_dead([pid]) == []
