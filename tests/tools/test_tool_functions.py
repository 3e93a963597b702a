"""``PythonTool.as_function()`` in the agent frameworks that make tools of
functions, with the real packages: AG2's ``register_function`` in a
two-agent chat against a scripted model (``fake_llm``), AutoGen's
``FunctionTool``, LangChain's ``StructuredTool`` / ``@tool``. Each skips
when its package is absent (fails under EXECBOX_REQUIRE=all)."""

from __future__ import annotations

import ast
import asyncio
import inspect
import time
import typing

import pytest
from fake_llm import FakeModel

from execbox import ConfigurationError
from execbox.backends.sandbox import find_bwrap
from execbox.tools import PythonTool
from tests import _lazy
from tests.conftest import require, wait_dead

# AG2's, imported at first use (tests/_lazy.py): it costs each collecting worker ~3 s
MISSING_AG2 = _lazy.missing("autogen", hint="pip install 'execbox[ag2]'")
ConversableAgent = _lazy.Lazy("autogen", "ConversableAgent")
UserProxyAgent = _lazy.Lazy("autogen", "UserProxyAgent")
register_function = _lazy.Lazy("autogen", "register_function")

try:
    from autogen_core import CancellationToken
    from autogen_core.tools import FunctionTool
except ImportError as exc:
    MISSING_AUTOGEN: str | None = f"{exc}: pip install 'execbox[autogen]'"
else:
    MISSING_AUTOGEN = None

# LangChain's too (it imports LangSmith's client): ~1 s
MISSING_LANGCHAIN = _lazy.missing(
    "langchain_core", hint="pip install langchain-core (in execbox's dev extra)"
)
StructuredTool = _lazy.Lazy("langchain_core.tools", "StructuredTool")
langchain_tool = _lazy.Lazy("langchain_core.tools", "tool")
convert_to_openai_tool = _lazy.Lazy("langchain_core.utils.function_calling", "convert_to_openai_tool")

SIX_TIMES_SEVEN = {"success": True, "stdout": "42\n", "stderr": "", "error": None, "files": []}


def needs(component: str, missing: str | None) -> None:
    require(component, missing is None, missing or "")


@pytest.fixture
def tool(tmp_path):
    with PythonTool(backend="local", workspace=tmp_path / "ws", timeout=20) as made:
        yield made


def check_parameters(parameters: dict) -> None:
    """The arguments a framework derived from the function: ``code`` (a
    required string) and ``libraries`` (optional strings), described."""
    properties = parameters["properties"]
    assert set(properties) == {"code", "libraries"}
    assert parameters["required"] == ["code"]
    assert properties["code"]["type"] == "string"
    assert properties["code"]["description"] == "The Python code to run."
    assert "PyPI requirement" in properties["libraries"]["description"]
    assert {"type": "array", "items": {"type": "string"}} in properties["libraries"]["anyOf"]


# -- the function itself ------------------------------------------------------


def test_the_function_is_a_plain_function_with_real_types(tool):
    python = tool.as_function()
    assert inspect.isfunction(python) and not inspect.iscoroutinefunction(python)
    assert python.__name__ == python.__qualname__ == "python"
    assert python.__module__.startswith("execbox.tools")
    assert list(inspect.signature(python).parameters) == ["code", "libraries"]
    assert inspect.signature(python).parameters["libraries"].default is None
    assert typing.get_type_hints(python) == {
        "code": str,
        "libraries": list[str] | None,
        "return": dict[str, typing.Any],
    }
    hints = typing.get_type_hints(python, include_extras=True)
    assert typing.get_args(hints["code"])[:2] == (str, "The Python code to run.")
    assert python.__doc__.startswith(tool.description + "\n\nArgs:\n    code: The Python code to run.\n")
    assert "\n    libraries: PyPI requirement strings" in python.__doc__
    assert python("print(6 * 7)") == SIX_TIMES_SEVEN
    assert python(code="import sys\nprint(sys.argv is not None)", libraries=None)["stdout"] == "True\n"
    assert python("1/0")["error"] == "ZeroDivisionError: division by zero"
    assert python("print(1)", libraries=["execbox-no-such-package-zz"])["error"].startswith(
        "LibrariesUnavailable"
    )


def test_name_defaults_to_the_tools_and_is_checked(tmp_path):
    with PythonTool(backend="local", workspace=tmp_path / "ws", name="run-python") as named:
        assert named.as_function().__name__ == "run-python"
        assert named.as_function(name="py").__name__ == "py"
        with pytest.raises(ConfigurationError, match=r"as_function\(name='no spaces'\)"):
            named.as_function(name="no spaces")


def test_the_async_function_runs_and_cancelling_it_kills_the_code(tool):
    python = tool.as_function(asynchronous=True)
    assert inspect.iscoroutinefunction(python) and python.__name__ == "python"
    assert str(inspect.signature(python)) == str(inspect.signature(tool.as_function()))
    assert asyncio.run(python("print(6 * 7)")) == SIX_TIMES_SEVEN

    async def cancelled() -> int:
        pid_file = tool.workspace.path / "pid"
        running = asyncio.ensure_future(
            python(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\ntime.sleep(60)")
        )
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.05)
        started = time.monotonic()
        running.cancel()
        with pytest.raises(asyncio.CancelledError):
            await running
        assert time.monotonic() - started < 5
        return int(pid_file.read_text())

    assert wait_dead([asyncio.run(cancelled())]) == []
    assert asyncio.run(python("print(6 * 7)")) == SIX_TIMES_SEVEN


# -- AG2 ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["local", "sandbox"])
def test_ag2_two_agents_call_the_function(backend, tmp_path):
    needs("ag2", MISSING_AG2)
    if backend == "sandbox":
        require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    script = [
        {"tool_calls": [{"name": "python", "arguments": {"code": "print(6*7)"}}]},
        "It printed 42. TERMINATE",
    ]
    with (
        FakeModel(script) as fake,
        PythonTool(backend=backend, workspace=tmp_path / "ws", timeout=20) as tool,
    ):
        llm_config = {
            "config_list": [{"model": "fake-model", "base_url": fake.base_url, "api_key": "k"}],
            "cache_seed": None,
        }
        assistant = ConversableAgent(
            "assistant",
            llm_config=llm_config,
            human_input_mode="NEVER",
            system_message="Use the python tool. Say TERMINATE when done.",
        )
        runner = UserProxyAgent(
            "runner",
            human_input_mode="NEVER",
            code_execution_config=False,
            is_termination_msg=lambda m: "TERMINATE" in (m.get("content") or ""),
        )
        register_function(tool.as_function(), caller=assistant, executor=runner, description=tool.description)
        chat = runner.initiate_chat(assistant, message="What is 6 * 7? Run it.", max_turns=3, silent=True)

    assert fake.remaining == 0 and len(fake.requests) == 2
    [sent] = fake.requests[0]["tools"]
    assert sent["function"]["name"] == "python"
    assert sent["function"]["description"] == tool.description
    check_parameters(sent["function"]["parameters"])
    answers = [m for m in fake.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(answers) == 1
    assert ast.literal_eval(answers[0]["content"]) == SIX_TIMES_SEVEN  # AG2 sends str() of the dict
    assert chat.chat_history[-1]["content"] == "It printed 42. TERMINATE"


def test_ag2_refuses_the_tool_object_itself(tool):
    needs("ag2", MISSING_AG2)
    agent = ConversableAgent("runner", llm_config=False, human_input_mode="NEVER")
    with pytest.raises(TypeError, match="must be a function or a Tool"):  # as the PythonTool docstring says
        register_function(tool, caller=agent, executor=agent, description="x")  # type: ignore[arg-type]


def test_ag2_rewriting_annotations_leaves_later_functions_alone(tool):
    """AG2 rewrites the ``Annotated`` metadata of what it registers in place;
    a function made afterwards still has its descriptions as strings."""
    needs("ag2", MISSING_AG2)
    needs("autogen", MISSING_AUTOGEN)
    never_asked = {
        "config_list": [{"model": "fake-model", "base_url": "http://127.0.0.1:9/v1", "api_key": "k"}]
    }
    agent = ConversableAgent("runner", llm_config=never_asked, human_input_mode="NEVER")
    register_function(tool.as_function(), caller=agent, executor=agent, description=tool.description)
    later = tool.as_function()
    hints = typing.get_type_hints(later, include_extras=True)
    assert typing.get_args(hints["code"])[1] == "The Python code to run."
    check_parameters(FunctionTool(later, description=tool.description).schema["parameters"])


# -- AutoGen -------------------------------------------------------------------


@pytest.mark.parametrize("asynchronous", [False, True])
def test_autogen_function_tool_runs_the_code(asynchronous, tool):
    needs("autogen", MISSING_AUTOGEN)
    function_tool = FunctionTool(tool.as_function(asynchronous=asynchronous), description=tool.description)
    assert function_tool.name == "python"
    schema = function_tool.schema
    assert schema["description"] == tool.description
    check_parameters(schema["parameters"])

    async def main() -> None:
        token = CancellationToken()
        result = await function_tool.run_json({"code": "print(6*7)"}, token)
        assert result == SIX_TIMES_SEVEN
        assert ast.literal_eval(function_tool.return_value_as_string(result)) == SIX_TIMES_SEVEN  # str()
        failed = await function_tool.run_json(
            {"code": "print(1)", "libraries": ["execbox-no-such-package-zz"]}, token
        )
        assert failed["error"].startswith("LibrariesUnavailable: execbox-no-such-package-zz is not installed")

    asyncio.run(main())


# -- LangChain -----------------------------------------------------------------


def test_langchain_structured_tool_and_decorator_run_the_code(tool):
    needs("langchain", MISSING_LANGCHAIN)
    from_function = StructuredTool.from_function(tool.as_function())
    decorated = langchain_tool(tool.as_function())
    for made in (from_function, decorated):
        assert made.name == "python"
        assert made.invoke({"code": "print(6*7)"}) == SIX_TIMES_SEVEN
        schema = convert_to_openai_tool(made)["function"]
        assert schema["name"] == "python" and schema["description"].startswith(tool.description)
        check_parameters(schema["parameters"])

    parsed = StructuredTool.from_function(tool.as_function(), parse_docstring=True)
    assert parsed.description == tool.description  # the Args and Returns sections parsed off
    check_parameters(convert_to_openai_tool(parsed)["function"]["parameters"])


def test_langchain_async_tool_runs_the_code(tool):
    needs("langchain", MISSING_LANGCHAIN)
    made = langchain_tool(tool.as_function(asynchronous=True))
    assert asyncio.run(made.ainvoke({"code": "print(6*7)", "libraries": []})) == SIX_TIMES_SEVEN
