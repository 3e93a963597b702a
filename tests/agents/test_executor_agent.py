"""CodeExecutorAgent: running code from messages, and the model loop
(generate, execute, retry on error, reflect) against the scripted model server."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from fake_llm import FakeModel

import execbox
from execbox import ConfigurationError
from execbox.agents import (
    Approval,
    CodeExecutionEvent,
    CodeExecutorAgent,
    CodeGenerationEvent,
    ModelClient,
    Response,
    RetryDecisionEvent,
    StreamChunkEvent,
    TextMessage,
    ThoughtEvent,
    TokenLimitedContext,
)

FAILING = "Let me compute it.\n```python\nprint(undefined_name)\n```"
FIXED = "Fixed the name.\n```python\nvalue = 6 * 7\nprint('value', value)\n```"
RETRY = '{"retry": true, "reason": "undefined_name is not defined; define the value first"}'
REFLECTION = "The value is 42."


@pytest.fixture
def local():
    with execbox.LocalExecutor() as ex:
        yield ex


def test_without_a_model_it_runs_the_code_in_messages(local):
    agent = CodeExecutorAgent("runner", local)
    response = agent.run([TextMessage("coder", "Here:\n```python\nprint('hello from the model')\n```")])
    assert response.content == "hello from the model\n"
    assert isinstance(response.inner[0], CodeExecutionEvent) and response.inner[0].result.exit_code == 0


def test_only_given_sources_are_run(local, tmp_path):
    agent = CodeExecutorAgent("runner", local, sources=["coder"])
    messages = [
        {"source": "stranger", "content": "```python\nopen('stranger.txt', 'w')\n```"},
        {"source": "coder", "content": "```python\nprint('from coder')\n```"},
    ]
    assert agent.run(messages).content == "from coder\n"
    assert not (local.workspace.path / "stranger.txt").exists()
    only_stranger = agent.run([messages[0]])
    assert only_stranger.content == CodeExecutorAgent.NO_CODE_MESSAGE


def test_empty_output_and_failure_are_stated(local):
    agent = CodeExecutorAgent("runner", local)
    quiet = agent.run("```python\nx = 1\n```").content
    assert "printed nothing (exit code 0)" in quiet
    failed = agent.run("```bash\necho partial; exit 3\n```").content
    assert failed.startswith("The code ran and failed with exit code 3.") and "partial" in failed


def test_generate_fail_retry_succeed_reflect(local):
    script = [FAILING, RETRY, FIXED, REFLECTION]
    with FakeModel(script) as server:
        model = ModelClient("gpt-4o-mini", base_url=server.base_url, api_key="k")
        agent = CodeExecutorAgent("coder", local, model=model, max_retries_on_error=2)
        items = list(agent.stream("Compute six times seven."))
        requests = server.requests
    kinds = [type(i).__name__ for i in items]
    assert kinds == [
        "CodeGenerationEvent",
        "CodeExecutionEvent",
        "RetryDecisionEvent",
        "CodeGenerationEvent",
        "CodeExecutionEvent",
        "Response",
    ]
    first_run, retry, second_run, response = items[1], items[2], items[4], items[5]
    assert first_run.result.exit_code == 1 and "NameError" in first_run.output
    assert retry.retry and "define the value" in retry.reason
    assert second_run.result.exit_code == 0 and second_run.output == "value 42\n"
    assert items[3].retry_attempt == 1
    assert response.content == REFLECTION
    assert response.usage.total_tokens > 0 and response.usage.cost > 0
    # the model saw the failure, was asked for a decision in JSON, then saw the fix's output
    assert "NameError" in requests[1]["messages"][-1]["content"]
    assert requests[1]["response_format"]["type"] == "json_schema"
    assert requests[3]["messages"][-1] == {"role": "user", "content": "value 42\n"}


def test_the_model_may_decline_to_retry(local):
    with FakeModel(
        [FAILING, '{"retry": false, "reason": "needs data we do not have"}', "Cannot do it."]
    ) as server:
        agent = CodeExecutorAgent(
            "coder", local, model=ModelClient("m", base_url=server.base_url), max_retries_on_error=3
        )
        response = agent.run("go")
    decisions = [e for e in response.inner if isinstance(e, RetryDecisionEvent)]
    assert [d.retry for d in decisions] == [False]
    assert sum(isinstance(e, CodeExecutionEvent) for e in response.inner) == 1
    assert response.content == "Cannot do it."


def test_without_retries_a_failure_goes_straight_to_reflection(local):
    with FakeModel([FAILING, "It failed: the name is undefined."]) as server:
        agent = CodeExecutorAgent("coder", local, model=ModelClient("m", base_url=server.base_url))
        response = agent.run("go")
    assert response.content == "It failed: the name is undefined."
    assert len(server.requests) == 2 and "response_format" not in server.requests[1]


def test_a_reply_without_code_is_the_answer(local):
    with FakeModel([{"content": "No code needed: 4.", "reasoning_content": "2+2"}]) as server:
        agent = CodeExecutorAgent("coder", local, model=ModelClient("m", base_url=server.base_url))
        response = agent.run("2+2?")
    assert response.content == "No code needed: 4."
    assert response.inner == (ThoughtEvent("coder", "2+2"),)


def test_streamed_model_chunks_and_async_stream(local):
    async def collect():
        with FakeModel(["```python\nprint(5)\n```", "Five was printed."]) as server:
            agent = CodeExecutorAgent(
                "coder", local, model=ModelClient("m", base_url=server.base_url), stream_model=True
            )
            return [item async for item in agent.arun_stream("print five")]

    items = asyncio.run(collect())
    chunks = [i.content for i in items if isinstance(i, StreamChunkEvent)]
    assert "".join(chunks) == "```python\nprint(5)\n```" + "Five was printed."
    assert any(isinstance(i, CodeGenerationEvent) for i in items)
    assert isinstance(items[-1], Response) and items[-1].content == "Five was printed."


def test_async_run_matches_run(local):
    agent = CodeExecutorAgent("runner", local)
    response = asyncio.run(agent.arun("```python\nprint('async')\n```"))
    assert response.content == "async\n"


def test_save_and_load(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with FakeModel(["```python\nprint(2 ** 10)\n```", "1024."]) as server:
        executor = execbox.LocalExecutor(workspace=tmp_path / "ws", limits=execbox.Limits(timeout_s=9))
        agent = CodeExecutorAgent(
            "coder",
            executor,
            model=ModelClient("m", base_url=server.base_url),
            max_retries_on_error=1,
            sources=["a"],
        )
        path = tmp_path / "agent.json"
        agent.save(path)
        executor.close()
        assert "from-env" not in path.read_text()
        loaded = CodeExecutorAgent.load(path)
        assert json.loads(path.read_text()) == loaded.to_config()
        with loaded.executor:
            assert loaded.executor.limits.timeout_s == 9
            response = loaded.run("2**10")
    assert response.inner[1].output == "1024\n"
    assert set(server.authorization) == {"Bearer from-env"}


def test_bad_arguments_say_what_to_change(local):
    with pytest.raises(ConfigurationError, match="needs a model"):
        CodeExecutorAgent("x", local, max_retries_on_error=1)
    with pytest.raises(ConfigurationError, match="needs an execbox executor"):
        CodeExecutorAgent("x", "local")
    with pytest.raises(ConfigurationError, match="not a CodeExecutorAgent config"):
        CodeExecutorAgent.from_config({"type": "other"})


def test_approval_refuses_code_and_nothing_runs(local):
    asked = []

    def approve(request):
        asked.append(request)
        return False

    agent = CodeExecutorAgent("runner", local, approval=approve)
    response = agent.run("```python\nopen('refused.txt', 'w').write('ran')\n```")
    assert response.content == "The user refused to run this. Nothing was run."
    assert not (local.workspace.path / "refused.txt").exists()
    assert asked[0].kind == "code" and "refused.txt" in asked[0].code_blocks[0].code

    with FakeModel(["```python\nopen('refused.txt', 'w')\n```", "I will not write it."]) as server:
        writer = CodeExecutorAgent(
            "coder",
            local,
            model=ModelClient("m", base_url=server.base_url, api_key="k"),
            approval=lambda r: Approval(False, "no files"),
        )
        answer = writer.run("write a file")
        told = server.requests[1]["messages"][-1]["content"]
    assert told == "The user refused to run this: no files. Nothing was run."
    assert answer.content == "I will not write it." and not (local.workspace.path / "refused.txt").exists()


def test_cancelling_arun_kills_the_running_block(local):
    code = "```python\nimport time\ntime.sleep(2)\nopen('after-cancel.txt', 'w').write('still ran')\n```"

    async def scenario():
        task = asyncio.create_task(CodeExecutorAgent("runner", local).arun(code))
        await asyncio.sleep(0.8)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(scenario())
    time.sleep(2.5)
    assert not (local.workspace.path / "after-cancel.txt").exists()


def test_model_context_bounds_what_is_sent(local):
    replies = [f"Answer {i}." for i in range(6)]
    with FakeModel(replies) as server:
        agent = CodeExecutorAgent(
            "coder",
            local,
            model=ModelClient("m", base_url=server.base_url, api_key="k"),
            model_context=TokenLimitedContext(30),
        )
        for i in range(6):
            agent.run(f"question {i} " + "word " * 20)
        sizes = [len(r["messages"]) for r in server.requests]
    assert sizes[0] == 2 and max(sizes) <= 3  # the system message and what fits 30 tokens
    assert server.requests[-1]["messages"][-1]["content"].startswith("question 5")
