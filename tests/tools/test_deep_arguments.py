"""Tool call arguments nested 100,000 levels deep (execbox issue 39): a
model's arguments are hostile, and CPython's JSON parser (and ``repr``,
pydantic's messages) raise ``RecursionError`` on such nesting. Each tool
answers the model with an error text that names the limit, with pydantic
and without, sync and async, and the agent goes on; nothing raises.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_llm import FakeModel

import execbox
from execbox.agents import AssistantAgent, ModelClient
from execbox.agents._anthropic import to_anthropic
from execbox.tools import FunctionTool, PythonTool, ShellTool
from execbox.tools._bounded_json import MAX_DEPTH, TooDeep, data_depth, loads, text_depth

DEEP = 100_000
PAYLOADS = {
    "arrays": "[" * DEEP,
    "objects": '{"a":' * DEEP,
    "closed": '{"a": ' + "[" * DEEP + "]" * DEEP + "}",  # valid JSON, only too deep
}
TOO_DEEP = f"levels deep; send them nested at most {MAX_DEPTH} levels."


def deep_list(levels: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(levels - 1):
        value = [value]
    return value


def anything(a: Any = None) -> str:
    return "ran"


def number(a: int) -> int:
    return a


@pytest.fixture(scope="module")
def local():
    with execbox.LocalExecutor() as executor:
        yield executor


def test_the_depth_is_measured_without_recursion():
    assert text_depth('{"a": "[[{{", "b": [[1], {"c": "\\"]"}]}') == 3
    assert text_depth("[" * DEEP) == DEEP and text_depth('"' + "[" * DEEP) == 0
    assert data_depth(deep_list(DEEP)) == MAX_DEPTH + 1  # it stops past the limit
    assert data_depth({"a": [1, {"b": 2}]}) == 3
    looped: dict[str, Any] = {}
    looped["self"] = looped
    assert data_depth(looped) == MAX_DEPTH + 1
    assert loads(b'{"a": [[1]]}') == {"a": [[1]]}
    nested_enough = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert loads(nested_enough) == json.loads(nested_enough)
    with pytest.raises(TooDeep, match=f"nested {MAX_DEPTH + 1} levels deep"):
        loads("[" + nested_enough + "]")


@pytest.mark.parametrize("function", [anything, number])
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_deep_json_arguments_come_back_as_an_error_text(function, payload):
    tool = FunctionTool(function)
    said = tool.call(PAYLOADS[payload])
    assert said.startswith(f"Error: the arguments of {function.__name__} nest ") and said.endswith(TOO_DEEP)
    assert asyncio.run(tool.acall(PAYLOADS[payload].encode())) == said
    assert tool.call('{"a": 3}') in ('"ran"', "ran", "3")  # the tool still works


@pytest.mark.parametrize("function", [anything, number])
def test_deep_data_arguments_come_back_as_an_error_text(function):
    tool = FunctionTool(function)
    said = tool.call({"a": deep_list(DEEP)})
    assert said == f"Error: the arguments of {function.__name__} nest {MAX_DEPTH + 1} {TOO_DEEP}"
    assert asyncio.run(tool.acall({"a": deep_list(DEEP)})) == said


def test_without_pydantic_deep_arguments_come_back_as_an_error_text():
    code = (
        "import asyncio, json, sys\nsys.modules['pydantic'] = None\n"
        "from execbox.tools import FunctionTool\n"
        "from tests.tools.test_deep_arguments import PAYLOADS, deep_list, number\n"
        "tool = FunctionTool(number)\n"
        "said = [tool.call(p) for p in PAYLOADS.values()] + [asyncio.run(tool.acall(p)) for p in PAYLOADS.values()]\n"
        "said += [tool.call({'a': deep_list(100000)}), asyncio.run(tool.acall({'a': deep_list(100000)}))]\n"
        "print(json.dumps([tool._checked is None, said]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}{os.pathsep}{root / 'tests'}"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    unchecked, said = json.loads(done.stdout)
    assert unchecked is True
    assert len(said) == 2 * len(PAYLOADS) + 2
    for text in said:
        assert text.startswith("Error: the arguments of number nest ") and text.endswith(TOO_DEEP), text


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_the_python_and_shell_tools_refuse_deep_arguments(local, payload):
    with PythonTool(local) as python, ShellTool(local) as shell:
        answers = [python.call(PAYLOADS[payload]), asyncio.run(python.acall(PAYLOADS[payload]))]
        answers += [shell.call(PAYLOADS[payload]), asyncio.run(shell.acall(PAYLOADS[payload]))]
    for answer in answers:
        assert "not valid JSON (nested " in answer["error"] or "not JSON (nested " in answer["error"], answer
        assert f"more than the {MAX_DEPTH} levels read" in answer["error"], answer
        assert answer["stdout"] == "" and answer.get("success") in (None, False), answer


def test_an_agent_answers_a_deep_call_and_goes_on(local):
    script = [
        {
            "tool_calls": [
                {"name": "number", "arguments": PAYLOADS["objects"]},
                {"name": "python", "arguments": PAYLOADS["arrays"]},
                {"name": "number", "arguments": '{"a": 7}'},
            ]
        },
        "Done.",
    ]
    with FakeModel(script) as fake, PythonTool(local) as python:
        model = ModelClient("gpt-4o-mini", base_url=fake.base_url, api_key="k")
        reply = AssistantAgent("assistant", model, tools=[number, python]).run("go")
        answered = [m["content"] for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert reply.content == "Done."
    for text, name in zip(answered[:2], ("number", "python"), strict=True):
        assert text.startswith(f"Error: the arguments of {name} are not JSON (nested "), text
        assert f"more than the {MAX_DEPTH} levels read" in text
    assert answered[2] == "7"


def test_a_deep_call_in_the_context_reaches_anthropic_unparsed():
    call = {"id": "c1", "type": "function", "function": {"name": "number", "arguments": PAYLOADS["arrays"]}}
    _, messages = to_anthropic([{"role": "assistant", "content": "", "tool_calls": [call]}])
    [block] = messages[0]["content"]
    assert block["type"] == "tool_use" and block["input"] == {"_unparsed": PAYLOADS["arrays"]}
