"""The AutoGen adapter with a real ``CodeExecutorAgent`` (no model client)
on the local, sandbox and jupyter executors: replies, cancellation through a
``CancellationToken``, the lifecycle, and the component config round trip."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from execbox import ConfigurationError, ExecutorClosedError, JupyterExecutor, Limits, LocalExecutor
from tests.conftest import import_error_without, make_executor, remote_token, require, wait_dead

try:
    from autogen_agentchat.agents import CodeExecutorAgent
    from autogen_agentchat.messages import TextMessage
    from autogen_core import CancellationToken, ComponentModel
    from autogen_core.code_executor import CodeBlock, CodeExecutor

    from execbox.integrations.autogen import CANCELLED_EXIT_CODE, AutoGenCodeExecutor, AutoGenCodeResult
except ImportError as exc:
    MISSING: str | None = f"{exc}: pip install 'execbox[autogen]' autogen-agentchat"
else:
    MISSING = None

# CodeExecutorAgent warns when it runs code without an approval function; these tests mean to.
pytestmark = pytest.mark.filterwarnings("ignore:No approval function set:UserWarning")


@pytest.fixture(autouse=True)
def _needs_autogen() -> None:
    require("autogen", MISSING is None, MISSING or "")


make = make_executor


KINDS = ["local", "sandbox", "jupyter", "remote"]


def message(content: str) -> TextMessage:
    return TextMessage(content=content, source="user")


async def ask(agent: CodeExecutorAgent, content: str, token: CancellationToken | None = None) -> str:
    response = await agent.on_messages([message(content)], token or CancellationToken())
    assert isinstance(response.chat_message, TextMessage)
    return response.chat_message.content


@pytest.mark.parametrize("kind", KINDS)
def test_the_agent_runs_code_and_replies_with_its_output(kind, tmp_path):
    async def main() -> None:
        async with AutoGenCodeExecutor(make(kind, tmp_path / "ws", Limits(timeout_s=20))) as code_executor:
            agent = CodeExecutorAgent("runner", code_executor=code_executor)
            assert (
                await ask(agent, "Run this:\n```python\nprint('hello from', 6 * 7)\n```") == "hello from 42\n"
            )
            failed = await ask(agent, "```python\ndef f():\n    return 1 / 0\nf()\n```")
            assert failed.startswith("The script ran, then exited with an error (POSIX exit code: 1)")
            assert "ZeroDivisionError" in failed and "return 1 / 0" in failed
            outcome = await agent.run(task="```sh\necho from-a-task\n```")
            assert outcome.messages[-1].content == "from-a-task\n"

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_a_cancelled_token_stops_the_block_and_the_executor_stays_usable(kind, tmp_path):
    stopper = {
        "local": "import time\ntime.sleep(60)",
        "sandbox": "while True:\n    pass",
        "jupyter": "import time\ntime.sleep(60)",
        "remote": "while True:\n    pass",
    }[kind]

    async def main() -> None:
        async with AutoGenCodeExecutor(make(kind, tmp_path / "ws", Limits(timeout_s=60))) as code_executor:
            blocks = [CodeBlock(code="kept = 7\nprint('started', flush=True)\n" + stopper, language="python")]
            token = CancellationToken()
            started = time.monotonic()
            running = asyncio.ensure_future(code_executor.execute_code_blocks(blocks, token))
            await asyncio.sleep(1.0)
            assert not running.done()
            token.cancel()
            result = await asyncio.wait_for(running, 15)
            assert time.monotonic() - started < 10
            assert isinstance(result, AutoGenCodeResult)
            assert result.exit_code == CANCELLED_EXIT_CODE
            assert result.output.startswith("started\n") and "Cancelled" in result.output
            assert "Code execution was cancelled" in result.output  # AutoGen's executors' wording
            again = await code_executor.execute_code_blocks(
                [CodeBlock(code="print('still here')", language="python")], CancellationToken()
            )
            assert (again.exit_code, again.output) == (0, "still here\n")
            if kind == "jupyter":  # an interrupt keeps the kernel's state
                kept = await code_executor.execute_code_blocks(
                    [CodeBlock(code="print(kept)", language="python")], CancellationToken()
                )
                assert kept.output == "7\n"

    asyncio.run(main())


def test_cancelling_an_agent_run_through_its_token(tmp_path):
    async def main() -> None:
        async with AutoGenCodeExecutor(backend="local", workspace=tmp_path / "ws") as code_executor:
            agent = CodeExecutorAgent("runner", code_executor=code_executor)
            token = CancellationToken()
            asyncio.get_running_loop().call_later(0.5, token.cancel)
            started = time.monotonic()
            code = "import os\nopen('pid', 'w').write(str(os.getpid()))\nwhile True:\n    pass"
            reply = await ask(agent, f"```python\n{code}\n```", token)
            assert time.monotonic() - started < 10
            assert f"POSIX exit code: {CANCELLED_EXIT_CODE}" in reply and "Cancelled" in reply
            assert wait_dead([int((tmp_path / "ws" / "pid").read_text())]) == []

    asyncio.run(main())


def test_a_token_cancelled_beforehand_runs_nothing(tmp_path):
    async def main() -> None:
        async with AutoGenCodeExecutor(backend="local", workspace=tmp_path / "ws") as code_executor:
            token = CancellationToken()
            token.cancel()
            result = await code_executor.execute_code_blocks(
                [CodeBlock(code="open('ran.txt', 'w').write('x')", language="python")], token
            )
            assert result.exit_code == CANCELLED_EXIT_CODE and "did not run" in result.output
            assert not (tmp_path / "ws" / "ran.txt").exists()

    asyncio.run(main())


def test_cancelling_the_task_raises_and_kills_the_block(tmp_path):
    async def main() -> None:
        async with AutoGenCodeExecutor(backend="local", workspace=tmp_path / "ws") as code_executor:
            code = "import os, time\nopen('pid', 'w').write(str(os.getpid()))\ntime.sleep(60)"
            running = asyncio.ensure_future(
                code_executor.execute_code_blocks(
                    [CodeBlock(code=code, language="python")], CancellationToken()
                )
            )
            pid_file = tmp_path / "ws" / "pid"
            for _ in range(100):
                if pid_file.exists() and pid_file.read_text():
                    break
                await asyncio.sleep(0.05)
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            assert wait_dead([int(pid_file.read_text())]) == []

    asyncio.run(main())


def test_start_stop_restart(tmp_path):
    async def main() -> None:
        code_executor = AutoGenCodeExecutor(make("jupyter", None, Limits(timeout_s=20)))
        await code_executor.start()
        first = code_executor.executor
        set_x = [CodeBlock(code="x = 5", language="python")]
        show_x = [CodeBlock(code="print(x)", language="python")]
        assert (await code_executor.execute_code_blocks(set_x, CancellationToken())).exit_code == 0
        assert (await code_executor.execute_code_blocks(show_x, CancellationToken())).output == "5\n"
        await code_executor.restart()  # a new kernel: the state is gone, the executor is the same
        lost = await code_executor.execute_code_blocks(show_x, CancellationToken())
        assert lost.exit_code == 1 and "NameError" in lost.output
        assert code_executor.executor is first
        workspace = first.workspace.path
        await code_executor.stop()  # closed: the temporary workspace is removed
        assert not workspace.exists()
        with pytest.raises(ExecutorClosedError):
            first.start()
        await code_executor.start()  # a new executor from the same config
        assert code_executor.executor is not first and isinstance(code_executor.executor, JupyterExecutor)
        again = await code_executor.execute_code_blocks(
            [CodeBlock(code="print('back')", language="python")], CancellationToken()
        )
        assert again.output == "back\n"
        await code_executor.stop()

    asyncio.run(main())


@pytest.mark.parametrize("kind", KINDS)
def test_dump_and_load_component_gives_a_working_executor(kind, tmp_path, monkeypatch):
    limits = Limits(timeout_s=17, max_output_bytes=4096)
    original = AutoGenCodeExecutor(make(kind, tmp_path / "ws", limits))
    if (
        kind == "remote"
    ):  # the token is never saved with the config: the loaded one reads it as a user's would
        monkeypatch.setenv("EXECBOX_TOKEN", remote_token())
    dumped = original.dump_component()
    assert dumped.provider == "execbox.integrations.autogen.AutoGenCodeExecutor"
    assert dumped.component_type == "code_executor"
    assert dumped.config["backend"] == kind
    saved = json.loads(dumped.model_dump_json())  # plain JSON, as a config file holds it

    async def main() -> None:
        async with CodeExecutor.load_component(saved) as loaded:
            assert isinstance(loaded, AutoGenCodeExecutor) and loaded is not original
            assert type(loaded.executor) is type(original.executor)
            assert loaded.executor.limits == limits
            assert loaded.executor.workspace.path == original.executor.workspace.path
            result = await loaded.execute_code_blocks(
                [CodeBlock(code="open('made.txt', 'w').write('ok')\nprint('loaded')", language="python")],
                CancellationToken(),
            )
            assert result.exit_code == 0 and result.output.startswith("loaded\n")
        assert (tmp_path / "ws" / "made.txt").read_text() == "ok"

    asyncio.run(main())
    asyncio.run(original.stop())


def test_an_agent_with_the_executor_round_trips(tmp_path):
    async def main() -> None:
        agent = CodeExecutorAgent(
            "runner",
            code_executor=AutoGenCodeExecutor(
                backend="local", workspace=str(tmp_path / "ws"), limits=Limits(timeout_s=9)
            ),
        )
        loaded = CodeExecutorAgent.load_component(agent.dump_component())
        assert loaded._code_executor.executor.limits.timeout_s == 9
        assert await ask(loaded, "```python\nprint('round trip')\n```") == "round trip\n"
        await loaded._code_executor.stop()

    asyncio.run(main())


def test_a_config_whose_backends_disagree_is_refused():
    model = ComponentModel(
        provider="execbox.integrations.autogen.AutoGenCodeExecutor",
        component_type="code_executor",
        config={"backend": "sandbox", "executor": {"backend": "local", "options": {}}},
    )
    with pytest.raises(ConfigurationError, match="make the two agree"):
        AutoGenCodeExecutor.load_component(model)


def test_an_executor_with_options_that_are_not_data_cannot_be_dumped(tmp_path):
    code_executor = AutoGenCodeExecutor(backend="local", workspace=tmp_path / "ws", on_progress=print)
    with pytest.raises(ConfigurationError, match="progress"):
        code_executor.dump_component()


def test_filename_comments_and_inferred_languages(tmp_path):
    async def main() -> None:
        async with AutoGenCodeExecutor(backend="local", workspace=tmp_path / "ws") as code_executor:
            blocks = [
                CodeBlock(code="# filename: app.py\nprint('saved and ran')\n", language="python"),
                CodeBlock(code="echo from-sh\n", language=""),
            ]  # a fence without a language
            result = await code_executor.execute_code_blocks(blocks, CancellationToken())
            assert (result.exit_code, result.output) == (0, "saved and ran\nfrom-sh\n")
            assert result.code_file == str(tmp_path / "ws" / "app.py")
            assert (tmp_path / "ws" / "app.py").read_text().startswith("# filename: app.py")
            assert [b.language for b in result.execution.blocks] == ["python", "sh"]
            with pytest.raises(ValueError, match="no code blocks"):
                await code_executor.execute_code_blocks([], CancellationToken())

    asyncio.run(main())


def test_bad_arguments_name_what_to_change(tmp_path):
    with pytest.raises(ConfigurationError, match="execbox executor such as"):
        AutoGenCodeExecutor(object())  # type: ignore[arg-type]
    with LocalExecutor(workspace=tmp_path / "ws") as given:
        with pytest.raises(ConfigurationError, match="also backend"):
            AutoGenCodeExecutor(given, backend="local")


def test_without_autogen_core_the_import_error_says_what_to_install():
    assert "[autogen]' (execbox's autogen extra" in import_error_without(
        "autogen_core", "execbox.integrations.autogen"
    )


def test_rich_outputs_saved_by_a_kernel_are_output_files(tmp_path):
    async def main() -> None:
        code = "from IPython.display import HTML, display\ndisplay(HTML('<b>bold</b>'))"
        async with AutoGenCodeExecutor(
            backend="jupyter", workspace=tmp_path / "ws", output_dir=tmp_path / "out"
        ) as code_executor:
            result = await code_executor.execute_code_blocks(
                [CodeBlock(code=code, language="python")], CancellationToken()
            )
        assert result.exit_code == 0, result.output
        saved = [p for p in result.output_files if p.startswith(str(tmp_path / "out"))]
        assert len(saved) == 1 and saved[0].endswith(".html"), result.output_files
        assert "<b>bold</b>" in open(saved[0], encoding="utf-8").read()

    asyncio.run(main())
