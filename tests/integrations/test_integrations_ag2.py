"""The AG2 adapter with real AG2 agents (no model: ``llm_config=False``)
replying to messages that hold code, on the local, sandbox and jupyter
executors."""

from __future__ import annotations

import pytest

from execbox import ConfigurationError, Limits, LocalExecutor, Workspace
from tests._lazy import Lazy, missing
from tests.conftest import import_error_without, make_executor, require

# imported at first use (tests/_lazy.py): AG2 costs each collecting worker ~3 s
MISSING = missing("autogen", hint="pip install 'execbox[ag2]'")
ConversableAgent = Lazy("autogen", "ConversableAgent")
AG2Protocol = Lazy("autogen.coding", "CodeExecutor")
MarkdownCodeExtractor = Lazy("autogen.coding", "MarkdownCodeExtractor")
AG2CodeBlock = Lazy("execbox.integrations.ag2", "AG2CodeBlock")
AG2CodeExecutor = Lazy("execbox.integrations.ag2", "AG2CodeExecutor")
AG2CodeResult = Lazy("execbox.integrations.ag2", "AG2CodeResult")

SUCCEEDED = "exitcode: 0 (execution succeeded)\nCode output: "


@pytest.fixture(autouse=True)
def _needs_ag2() -> None:
    require("ag2", MISSING is None, MISSING or "")


make = make_executor


@pytest.fixture(params=["local", "sandbox", "jupyter", "remote"])
def runner(request, tmp_path):
    with AG2CodeExecutor(make(request.param, tmp_path / "ws", Limits(timeout_s=20))) as ex:
        yield ex


def agent_for(runner: AG2CodeExecutor) -> ConversableAgent:
    return ConversableAgent(
        name="runner",
        llm_config=False,
        human_input_mode="NEVER",
        code_execution_config=runner.code_execution_config(),
    )


def reply(agent: ConversableAgent, content: str) -> str:
    answer = agent.generate_reply(messages=[{"role": "user", "content": content}])
    assert isinstance(answer, str), answer
    return answer


def test_an_agent_runs_the_block_and_replies_in_ag2_form(runner):
    message = "Here is the code:\n```python\nprint('hello from', 6 * 7)\n```\nRun it."
    answer = reply(agent_for(runner), message)
    assert answer == SUCCEEDED + "hello from 42\n"


def test_a_failing_block_gives_its_exit_code_and_traceback(runner):
    message = (
        "```python\nprint('before')\ndef f():\n    return 1 / 0\nf()\n```\n```python\nprint('never')\n```"
    )
    answer = reply(agent_for(runner), message)
    assert answer.startswith("exitcode: 1 (execution failed)\nCode output: before\n"), answer
    assert "ZeroDivisionError" in answer and "return 1 / 0" in answer
    assert "never" not in answer


def test_a_filename_comment_saves_the_block_in_the_workspace(runner):
    message = "```python\n# filename: tools/hello.py\nprint(open(__file__).read().splitlines()[0])\n```"
    answer = reply(agent_for(runner), message)
    saved = runner.executor.workspace.path / "tools" / "hello.py"
    assert saved.read_text().startswith("# filename: tools/hello.py\n")
    assert answer.startswith(SUCCEEDED), answer
    result = runner.execute_code_blocks(runner.code_extractor.extract_code_blocks(message))
    assert isinstance(result, AG2CodeResult) and result.code_file == str(saved)


def test_files_the_code_writes_are_reported(runner):
    message = "```python\nopen('out.txt', 'w').write('data')\nprint('written')\n```"
    result = runner.execute_code_blocks(runner.code_extractor.extract_code_blocks(message))
    assert result.exit_code == 0 and result.output.startswith("written\n")
    assert "Files created or changed: out.txt" in result.output
    assert result.output_files == [str(runner.executor.workspace.path / "out.txt")]
    assert result.execution is not None and result.execution.files == ("out.txt",)


def test_jupyter_keeps_state_across_replies_until_restart(tmp_path):
    with AG2CodeExecutor(make("jupyter", tmp_path / "ws", Limits(timeout_s=20))) as runner:
        agent = agent_for(runner)
        assert reply(agent, "```python\nsecret = 41\n```").startswith(SUCCEEDED)
        assert reply(agent, "```python\nprint(secret + 1)\n```") == SUCCEEDED + "42\n"
        runner.restart()
        lost = reply(agent, "```python\nprint(secret)\n```")
        assert lost.startswith("exitcode: 1 (execution failed)") and "NameError" in lost


@pytest.mark.parametrize("kind", ["local", "sandbox"])
def test_restart_keeps_the_executor_usable(kind, tmp_path):
    with AG2CodeExecutor(make(kind, tmp_path / "ws", Limits(timeout_s=20))) as runner:
        agent = agent_for(runner)
        assert reply(agent, "```sh\necho one\n```") == SUCCEEDED + "one\n"
        runner.restart()
        assert reply(agent, "```sh\necho two\n```") == SUCCEEDED + "two\n"


def test_a_two_agent_chat_without_a_model(tmp_path):
    with AG2CodeExecutor(backend="local", workspace=tmp_path / "ws") as runner:
        executor_agent = agent_for(runner)
        writer = ConversableAgent(
            name="writer",
            llm_config=False,
            human_input_mode="NEVER",
            code_execution_config=False,
            default_auto_reply="TERMINATE",
        )
        chat = writer.initiate_chat(
            executor_agent,
            max_turns=1,
            silent=True,
            message='Please run:\n```bash\nx=$((20 + 22)); echo "sum=$x"\n```',
        )
    last = chat.chat_history[-1]
    assert last["name"] == "runner"
    assert last["content"] == SUCCEEDED + "sum=42\n"


def test_options_reach_the_executor_a_timeout_is_exit_code_124(tmp_path):
    with AG2CodeExecutor(backend="local", workspace=tmp_path / "ws", limits=Limits(timeout_s=1)) as runner:
        assert isinstance(runner.executor, LocalExecutor)
        answer = reply(agent_for(runner), "```python\nimport time\ntime.sleep(30)\n```")
    assert answer.startswith("exitcode: 124 (execution failed)"), answer
    assert "timeout_s" in answer  # execbox's note names the setting to change


def test_the_extractor_is_execboxs(tmp_path):
    extractor = AG2CodeExecutor(backend="local", workspace=tmp_path / "ws").code_extractor
    blocks = extractor.extract_code_blocks(
        '~~~py title="calc.py"\nprint(1)\n~~~\n\n```\nls -la\n```\n\n```python\nunclosed'
    )
    assert [(b.language, b.filename, b.language_inferred) for b in blocks] == [
        ("python", "calc.py", False),
        ("sh", None, True),
    ]
    assert all(isinstance(b, AG2CodeBlock) for b in blocks)
    parts = [{"type": "text", "text": "```js\nconsole.log(1)\n```"}]
    assert [b.language for b in extractor.extract_code_blocks(parts)] == ["javascript"]
    assert extractor.extract_code_blocks(None) == []


def test_blocks_from_ag2s_own_extractor_run_too(tmp_path):
    # AG2's extractor gives "" for a language it cannot tell and keeps a filename comment in the code.
    blocks = MarkdownCodeExtractor().extract_code_blocks("```\n# filename: plain.py\nprint('inferred')\n```")
    with AG2CodeExecutor(backend="local", workspace=tmp_path / "ws") as runner:
        result = runner.execute_code_blocks(blocks)
        assert (result.exit_code, result.output) == (0, "inferred\n")
        assert (runner.executor.workspace.path / "plain.py").is_file()


def test_it_is_an_ag2_code_executor_and_fits_code_execution_config(tmp_path):
    runner = AG2CodeExecutor(LocalExecutor(workspace=tmp_path / "ws"))
    assert isinstance(runner, AG2Protocol)
    config = runner.code_execution_config(last_n_messages=2)
    assert config == {"executor": runner, "last_n_messages": 2}
    agent = ConversableAgent(name="a", llm_config=False, code_execution_config=config)
    assert agent.code_executor is runner
    runner.close()


def test_bad_arguments_name_what_to_change(tmp_path):
    with pytest.raises(ConfigurationError, match="execbox executor such as"):
        AG2CodeExecutor("local")  # type: ignore[arg-type]
    with LocalExecutor(workspace=tmp_path / "ws") as given:
        with pytest.raises(ConfigurationError, match="also backend, limits"):
            AG2CodeExecutor(given, backend="local", limits=Limits())
    with pytest.raises(ConfigurationError, match="unknown backend 'nope'"):
        AG2CodeExecutor(backend="nope")


def test_close_removes_a_temporary_workspace():
    with AG2CodeExecutor(backend="local") as runner:
        path = runner.executor.workspace.path
        assert runner.execute_code_blocks([AG2CodeBlock(code="print(1)", language="python")]).exit_code == 0
        assert path.is_dir()
    assert not path.exists()


def test_a_given_workspace_object_is_shared(tmp_path):
    workspace = Workspace(tmp_path / "shared")
    with AG2CodeExecutor(backend="local", workspace=workspace) as runner:
        reply(agent_for(runner), "```python\nopen('note.txt', 'w').write('kept')\n```")
    assert (tmp_path / "shared" / "note.txt").read_text() == "kept"


def test_without_ag2_the_import_error_says_what_to_install():
    assert "[ag2]' (execbox's ag2 extra" in import_error_without("autogen", "execbox.integrations.ag2")
