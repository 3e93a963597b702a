"""AssistantAgent: function calling against the scripted model servers (the
chat-completions one and the Messages-API one), tools run on real backends."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Literal

import pytest
from fake_anthropic import FakeAnthropic
from fake_llm import FakeModel

import execbox
from execbox import ConfigurationError
from execbox.agents import (
    AnthropicClient,
    Approval,
    ApprovalEvent,
    AssistantAgent,
    BufferedContext,
    ModelClient,
    Response,
    StreamChunkEvent,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from execbox.tools import FunctionTool, PythonTool, ShellTool, file_tools


def call(name: str, **arguments: object) -> dict[str, object]:
    return {"name": name, "arguments": arguments}


def fib(n: int) -> str:
    return f"a, b = 0, 1\nfor _ in range({n}):\n    a, b = b, a + b\nprint(a)"


def weather(city: str, unit: Literal["c", "f"] = "c") -> dict[str, object]:
    """Today's temperature in a city.

    Args:
        city: the city's name.
        unit: c for Celsius, f for Fahrenheit.
    """
    return {"city": city, "temperature": 21 if unit == "c" else 70}


@pytest.fixture
def local():
    with execbox.LocalExecutor() as ex:
        yield ex


def openai_model(fake: FakeModel) -> ModelClient:
    return ModelClient("gpt-4o-mini", base_url=fake.base_url, api_key="k")


def tool_messages(request: dict) -> list[dict]:
    return [m for m in request["messages"] if m["role"] == "tool"]


def test_a_tool_call_runs_and_its_result_goes_back_with_its_id(local):
    script = [{"tool_calls": [call("python", code=fib(20))]}, "The 20th Fibonacci number is 6765."]
    with FakeModel(script) as fake, PythonTool(local) as tool:
        agent = AssistantAgent("assistant", openai_model(fake), tools=[tool])
        events = list(agent.stream("What is the 20th Fibonacci number?"))
        sent_tools = fake.requests[0]["tools"]
        answered = tool_messages(fake.requests[1])
    response = events[-1]
    assert isinstance(response, Response) and response.content == "The 20th Fibonacci number is 6765."
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(calls) == 1 and calls[0].calls[0].name == "python"
    assert json.loads(results[0].content)["stdout"] == "6765\n" and not results[0].is_error
    assert sent_tools[0]["function"]["name"] == "python"
    assert "code" in sent_tools[0]["function"]["parameters"]["properties"]
    assert answered == [{"role": "tool", "tool_call_id": calls[0].calls[0].id, "content": results[0].content}]
    assert response.usage.prompt_tokens > 0


def test_parallel_calls_each_answered_in_order_and_a_plain_function_is_a_tool(local):
    script = [
        {
            "tool_calls": [
                call("weather", city="Oslo"),
                call("shell", command="echo from-shell"),
                call("nope"),
            ]
        },
        "Done.",
    ]
    with FakeModel(script) as fake, ShellTool(local) as shell:
        agent = AssistantAgent("assistant", openai_model(fake), tools=[weather, shell])
        response = agent.run("weather and a shell command")
        schema = {t["function"]["name"]: t["function"] for t in fake.requests[0]["tools"]}["weather"]
        answered = tool_messages(fake.requests[1])
        first_calls = fake.requests[1]["messages"][-4]["tool_calls"]
    assert schema["description"] == "Today's temperature in a city."
    assert schema["parameters"]["required"] == ["city"]
    assert schema["parameters"]["properties"]["unit"] == {
        "enum": ["c", "f"],
        "type": "string",
        "default": "c",
        "description": "c for Celsius, f for Fahrenheit.",
    }
    assert [m["tool_call_id"] for m in answered] == [c["id"] for c in first_calls]
    assert json.loads(answered[0]["content"]) == {"city": "Oslo", "temperature": 21}
    assert json.loads(answered[1]["content"])["stdout"] == "from-shell\n"
    assert answered[2]["content"].startswith("Error: there is no tool named 'nope'")
    assert response.content == "Done."


def test_the_iteration_limit_is_said_or_reflected_on(local):
    looping = {"tool_calls": [call("weather", city="Rome")]}
    with FakeModel([looping, looping]) as fake:
        agent = AssistantAgent("assistant", openai_model(fake), tools=[weather], max_tool_iterations=2)
        stopped = agent.run("loop")
    assert "Stopped after 2 round(s) of tool calls (max_tool_iterations)" in stopped.content
    assert '"Rome"' in stopped.content
    with FakeModel([looping, "It is 21 degrees in Rome."]) as fake:
        agent = AssistantAgent(
            "assistant", openai_model(fake), tools=[weather], max_tool_iterations=1, reflect_on_tool_use=True
        )
        reflected = agent.run("loop")
        last = fake.requests[-1]
    assert reflected.content == "It is 21 degrees in Rome." and last["tool_choice"] == "none"


def test_bad_arguments_come_back_to_the_model_to_fix(local):
    script = [
        {"tool_calls": [{"name": "weather", "arguments": "{not json"}, call("weather", town="Oslo")]},
        "ok",
    ]
    with FakeModel(script) as fake:
        AssistantAgent("assistant", openai_model(fake), tools=[weather]).run("go")
        answered = tool_messages(fake.requests[1])
    assert "are not JSON" in answered[0]["content"]
    assert "unknown argument(s) town; missing city" in answered[1]["content"]


def test_anthropic_messages_api_with_thinking_kept_apart_and_sent_back_signed(local):
    script = [
        {"thinking": "I should compute it.", "tool_calls": [call("python", code=fib(10))]},
        {"content": "It is 55."},
    ]
    with FakeAnthropic(script) as fake, PythonTool(local) as tool:
        model = AnthropicClient(
            "claude-sonnet-4-6", base_url=fake.base_url, api_key="k", thinking_budget=2048
        )
        agent = AssistantAgent("assistant", model, tools=[tool], stream_model=True)
        events = list(agent.stream("the 10th Fibonacci number"))
        second = fake.requests[1]
    response = events[-1]
    assert response.content == "It is 55."
    assert [e.content for e in events if isinstance(e, ThoughtEvent)] == ["I should compute it."]
    assert "".join(e.content for e in events if isinstance(e, StreamChunkEvent)) == "It is 55."
    assistant_turn = second["messages"][1]
    assert assistant_turn["content"][0] == {
        "type": "thinking",
        "thinking": "I should compute it.",
        "signature": "sig-1",
    }
    result = second["messages"][2]["content"][0]
    assert result["type"] == "tool_result" and json.loads(result["content"])["stdout"] == "55\n"
    assert second["tools"][0]["input_schema"]["required"] == ["code"]
    assert response.usage.cost is not None and response.usage.cost > 0  # priced as claude-sonnet-4


def test_a_refused_tool_call_runs_nothing_and_the_model_hears_why(local):
    seen = []

    async def approve(request):  # an async approver, as a web UI would have
        seen.append(request)
        return Approval(False, "no writing files today")

    script = [{"tool_calls": [call("python", code="open('written.txt', 'w').write('x')")]}, "Understood."]
    with FakeModel(script) as fake, PythonTool(local) as tool:
        agent = AssistantAgent("assistant", openai_model(fake), tools=[tool], approval=approve)
        events = list(agent.stream("write a file"))
        answered = tool_messages(fake.requests[1])
    assert not (local.workspace.path / "written.txt").exists()
    assert seen[0].kind == "tool_call" and "written.txt" in seen[0].code
    assert [e.approved for e in events if isinstance(e, ApprovalEvent)] == [False]
    assert answered[0]["content"] == "The user refused to run this: no writing files today. Nothing was run."
    assert events[-1].content == "Understood."


def test_a_call_whose_arguments_are_not_json_is_answered_without_asking(local):
    # (was: the person was asked to approve "python({not json" and "python([1, 2])", which cannot run)
    asked = []
    script = [
        {
            "tool_calls": [
                {"name": "python", "arguments": "{not json"},
                {"name": "python", "arguments": "[1, 2]"},
                call("python", code="print(6 * 7)"),
            ]
        },
        "Fixed.",
    ]
    with FakeModel(script) as fake, PythonTool(local) as tool:
        agent = AssistantAgent(
            "assistant", openai_model(fake), tools=[tool], approval=lambda r: asked.append(r) or True
        )
        events = list(agent.stream("go"))
        answered = tool_messages(fake.requests[1])
    assert [r.arguments for r in asked] == ['{"code": "print(6 * 7)"}']
    assert len([e for e in events if isinstance(e, ApprovalEvent)]) == 1
    assert answered[0]["content"].startswith("Error: the arguments of python are not JSON (")
    assert answered[1]["content"].startswith("Error: the arguments of python must be a JSON object, not list")
    assert "42" in answered[2]["content"]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    assert [r.is_error for r in results] == [True, True, False]


def test_cancelling_arun_kills_the_tool_s_running_code(local):
    code = "import time\ntime.sleep(2)\nopen('after-cancel.txt', 'w').write('still ran')"

    async def scenario(agent):
        task = asyncio.create_task(agent.arun("run it"))
        deadline = time.monotonic() + 10
        while not list(local.workspace.path.glob("*")) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the block's code file appears when it starts
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with (
        FakeModel([{"tool_calls": [call("python", code=code)]}, "never asked"]) as fake,
        PythonTool(local) as tool,
    ):
        asyncio.run(scenario(AssistantAgent("assistant", openai_model(fake), tools=[tool])))
        time.sleep(2.5)
        assert fake.remaining == 1  # the model was not asked again
    assert not (local.workspace.path / "after-cancel.txt").exists()


def test_model_context_keeps_the_system_message_and_tool_pairs_whole(local):
    with FakeModel([{"tool_calls": [call("weather", city=str(i))]} for i in range(4)] + ["end"]) as fake:
        agent = AssistantAgent(
            "assistant", openai_model(fake), tools=[weather], model_context=BufferedContext(3)
        )
        agent.run("go")
        sent = [r["messages"] for r in fake.requests]
    for messages in sent:
        assert messages[0]["role"] == "system"
        assert messages[1]["role"] != "tool"  # never a result without its call
        assert len(messages) - 1 <= 3
    assert sent[-1][-1]["role"] == "tool" and sent[-1][-2]["tool_calls"]


def test_save_and_load_keep_the_tools(local, tmp_path):
    with FakeModel(["hi"]) as fake, PythonTool(local) as tool:
        agent = AssistantAgent(
            "assistant",
            openai_model(fake),
            tools=[tool, weather, *file_tools(local)],
            max_tool_iterations=3,
            model_context=5,
        )
        agent.save(tmp_path / "agent.json")
        with AssistantAgent.load(tmp_path / "agent.json", api_key="k") as loaded:
            assert [t.name for t in loaded.tools] == [
                "python",
                "weather",
                "list_files",
                "read_file",
                "write_file",
            ]
            assert loaded.max_tool_iterations == 3 and loaded.model_context == BufferedContext(5)
            assert loaded.run("hello").content == "hi"
            assert loaded.tools[0].executor is not local

    def local_only() -> int:
        return 1

    with pytest.raises(ConfigurationError, match="local_only is not importable"):
        AssistantAgent("a", openai_model(fake), tools=[local_only]).to_config()


def test_file_tools_read_write_and_refuse_escapes(local):
    tools = {t.name: t for t in file_tools(local)}
    assert tools["write_file"].call({"path": "notes/a.txt", "content": "hello"}).startswith("Wrote 5 bytes")
    assert tools["read_file"].call({"path": "notes/a.txt"}) == "hello"
    assert "notes/a.txt" in tools["list_files"].call({})
    assert tools["read_file"].call({"path": "../../etc/passwd"}).startswith("Error:")


def test_function_tool_schema_and_errors():
    async def slow_add(a: int, b: list[int] | None = None) -> int:
        """Add numbers.

        :param a: the first.
        :param b: more of them.
        """
        return a + sum(b or [])

    tool = FunctionTool(slow_add)
    schema = tool.parameters()
    assert schema["properties"]["b"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],  # null is a value
        "default": None,
        "description": "more of them.",
    }
    assert tool.call({"a": 1, "b": [2, 3]}) == "6"
    assert asyncio.run(tool.acall('{"a": 1}')) == "1"
    with pytest.raises(ConfigurationError, match="tool name"):
        FunctionTool(slow_add, name="has space")


def test_a_sandboxed_python_tool_through_the_agent():
    script = [{"tool_calls": [call("python", code="import os\nprint(os.getuid() != 0 or 'root')")]}, "ok"]
    with FakeModel(script) as fake, PythonTool() as tool:  # the default backend: the sandbox
        AssistantAgent("assistant", openai_model(fake), tools=[tool]).run("who am I?")
        answered = tool_messages(fake.requests[1])
    assert json.loads(answered[0]["content"])["success"] is True
