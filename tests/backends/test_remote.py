"""The remote backend on its own: the mirrored workspace, its config, a
server that is not there, and the MCP server and execbox's agents running
on it unchanged, against a real ``execbox serve`` on loopback (the
contract suite and the hostile battery run it too)."""

from __future__ import annotations

import os
import sys

import anyio
import pytest

from execbox import CodeBlock, Limits, ServiceError, Workspace, create_executor, executor_from_config
from execbox.agents import CodeExecutorAgent, TextMessage
from tests.conftest import remote_executor, require
from tests.server._http import running_server


@pytest.fixture
def remote(tmp_path):
    with remote_executor(Workspace(tmp_path / "ws"), Limits(timeout_s=20)) as executor:
        yield executor


def test_the_mirror_sends_files_and_brings_back_what_the_run_wrote(remote):
    ws = remote.workspace
    ws.write_text("data/in.txt", "21")
    ws.write_bytes("blob.bin", b"\x00\xff\xfe")
    code = (
        "import os\nn = int(open('data/in.txt').read())\nos.makedirs('out', exist_ok=True)\n"
        "open('out/answer.txt', 'w').write(str(n * 2))\nprint(open('blob.bin', 'rb').read())"
    )
    result = remote.run(CodeBlock("python", code))
    assert result.output == "b'\\x00\\xff\\xfe'\n", result.output
    assert "out/answer.txt" in result.files and (ws.path / "out" / "answer.txt").read_text() == "42"
    os.remove(ws.path / "data" / "in.txt")  # removed here: removed there before the next run
    gone = remote.run(CodeBlock("python", "import os\nprint(os.path.exists('data/in.txt'))"))
    assert gone.output == "False\n"
    assert remote.session.download("out/answer.txt") == b"42"


def test_restart_opens_a_new_session_and_sends_the_files_again(remote):
    remote.workspace.write_text("kept.txt", "still here")
    remote.run(CodeBlock("python", "print(1)"))
    first = remote.session.id
    remote.restart()
    again = remote.run(CodeBlock("sh", "cat kept.txt"))
    assert remote.session.id != first and again.output == "still here"


def test_to_config_never_keeps_the_token(tmp_path):
    with running_server("--backend", "local", token="s3cret") as server:
        executor = create_executor(
            "remote",
            url=server.url,
            token="s3cret",
            backend="local",
            workspace=Workspace(tmp_path / "ws"),
            limits=Limits(timeout_s=5),
        )
        with executor:
            assert executor.run(CodeBlock("python", "print('authorized')")).output == "authorized\n"
            config = executor.to_config()
        assert "s3cret" not in repr(config) and config["backend"] == "remote"
        os.environ["EXECBOX_TOKEN"] = "s3cret"
        try:
            with executor_from_config(config) as again:
                assert again.run(CodeBlock("python", "print('again')")).output == "again\n"
        finally:
            del os.environ["EXECBOX_TOKEN"]
        refused = create_executor("remote", url=server.url, token="wrong", backend="local")
        with pytest.raises(ServiceError, match="token"):
            refused.run(CodeBlock("python", "print(1)"))
        refused.close()


def test_a_server_that_is_not_there_is_named(tmp_path):
    from tests.server._http import free_port

    url = f"http://127.0.0.1:{free_port()}"
    executor = create_executor("remote", url=url)
    with pytest.raises(ServiceError, match="execbox serve") as caught:
        executor.run(CodeBlock("python", "print(1)"))
    executor.close()
    assert url in str(caught.value) and caught.value.retryable


def test_execbox_agents_run_on_it_unchanged(remote):
    agent = CodeExecutorAgent("runner", remote)
    response = agent.run([TextMessage("coder", "```python\nprint('hello from the server')\n```")])
    assert response.content == "hello from the server\n"


def test_the_mcp_server_runs_on_it_unchanged(tmp_path):
    import importlib.util

    require("mcp", importlib.util.find_spec("mcp") is not None, "pip install 'execbox[mcp]' (./dev.sh does)")
    from mcp import Client, StdioServerParameters

    with running_server("--backend", "local") as server:
        env = {
            "PYTHONPATH": os.pathsep.join(sys.path),
            "EXECBOX_URL": server.url,
            "EXECBOX_TOKEN": server.token,
        }
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "execbox.cli", "mcp", "--backend", "remote"], env=env
        )

        async def scenario() -> None:
            async with Client(params, read_timeout_seconds=60) as client:
                wrote = await client.call_tool("write_file", {"path": "in.txt", "content": "6"})
                assert not wrote.is_error
                ran = await client.call_tool(
                    "run_code",
                    {
                        "code": "print(int(open('in.txt').read()) * 7)\n"
                        "open('out.txt', 'w').write('made there')"
                    },
                )
                text = "\n".join(c.text for c in ran.content if c.type == "text")
                assert text.startswith("exitcode: 0 (execution succeeded)\nCode output: 42\n"), text
                read = await client.call_tool("read_file", {"path": "out.txt"})
                assert read.content[0].text == "made there"

        anyio.run(scenario)
