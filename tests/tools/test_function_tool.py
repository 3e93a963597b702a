"""``FunctionTool`` on typed functions (execbox issue 32): with pydantic, the
schema is pydantic's with every model in the root's ``$defs``, and the
arguments are checked and converted before the call (a nested model
arrives as the model, ``"3"`` as 3, null where ``X | None``), a bad one
coming back as text the model can act on. Without pydantic (a fresh
interpreter that blocks it) the hand-written schema makes ``X | None``
nullable. The agents send the same schema, to the scripted OpenAI and
Anthropic servers."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

from fake_anthropic import FakeAnthropic
from fake_llm import FakeModel

from execbox.agents import AnthropicClient, AssistantAgent, ModelClient
from execbox.tools import FunctionTool
from execbox.tools._function_tool import _hand_schema, json_schema_of
from tests.conftest import require

try:
    import pydantic
except ImportError as exc:
    MISSING_PYDANTIC: str | None = f"{exc}: pip install 'execbox[agents]'"
else:
    MISSING_PYDANTIC = None

    class Inner(pydantic.BaseModel):
        x: int

    class Point(pydantic.BaseModel):
        a: Inner
        label: str = "here"


THE_ISSUES_CALL = '{"p": {"a": {"x": 1}}, "n": "3"}'


def needs_pydantic() -> None:
    require("pydantic", MISSING_PYDANTIC is None, MISSING_PYDANTIC or "")


def place(p: Point, n: int | None = None) -> dict[str, Any]:
    """Place a point.

    Args:
        p: where to place it.
        n: how many times; null for once.
    """
    return {"p": type(p).__name__, "x": p.a.x, "n": n, "n_type": type(n).__name__}


async def place_later(p: Point, n: int | None = None) -> dict[str, Any]:
    """Place a point, asynchronously."""
    await asyncio.sleep(0)
    return place(p, n)


def resolve(root: dict[str, Any], ref: str) -> Any:
    """The schema a local ``$ref`` (``#/$defs/Point``) points at, from the root."""
    assert ref.startswith("#/"), ref
    found: Any = root
    for part in ref[2:].split("/"):
        assert isinstance(found, dict) and part in found, f"{ref} does not resolve from the root"
        found = found[part]
    return found


def refs_of(schema: Any) -> list[str]:
    if isinstance(schema, dict):
        own = [schema["$ref"]] if "$ref" in schema else []
        return own + [r for v in schema.values() for r in refs_of(v)]
    if isinstance(schema, list):
        return [r for v in schema for r in refs_of(v)]
    return []


def check_tool_schema(schema: dict[str, Any]) -> None:
    """What OpenAI's ``parameters`` and Anthropic's ``input_schema`` need:
    an object with properties and required, every ``$ref`` resolving from
    the root, no ``$defs`` below it."""
    assert schema["type"] == "object" and isinstance(schema["properties"], dict)
    assert isinstance(schema["required"], list) and set(schema["required"]) <= set(schema["properties"])
    refs = refs_of(schema)
    assert refs, "the models are referenced"
    for ref in refs:
        assert isinstance(resolve(schema, ref), dict)
    for name, prop in schema["properties"].items():
        assert "$defs" not in keys_of(prop), f"{name} holds $defs"


def keys_of(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return set(schema) | {k for v in schema.values() for k in keys_of(v)}
    if isinstance(schema, list):
        return {k for v in schema for k in keys_of(v)}
    return set()


# -- with pydantic ------------------------------------------------------------


def test_the_issues_call_hands_the_function_a_point_and_an_int():
    needs_pydantic()
    tool = FunctionTool(place)
    assert json.loads(tool.call(THE_ISSUES_CALL)) == {"p": "Point", "x": 1, "n": 3, "n_type": "int"}
    assert json.loads(tool.call('{"p": {"a": {"x": 1}}, "n": null}'))["n_type"] == "NoneType"
    assert json.loads(tool.call({"p": Point(a=Inner(x=7))}))["x"] == 7  # a dict of values, a model in it


def test_the_schema_has_its_models_at_the_root_and_null_for_optional():
    needs_pydantic()
    schema = FunctionTool(place).parameters()
    check_tool_schema(schema)
    assert schema["required"] == ["p"]
    assert schema["properties"]["p"] == {"$ref": "#/$defs/Point", "description": "where to place it."}
    assert set(schema["$defs"]) == {"Point", "Inner"}
    assert resolve(schema, "#/$defs/Point")["properties"]["a"] == {"$ref": "#/$defs/Inner"}
    assert schema["properties"]["n"] == {
        "anyOf": [{"type": "integer"}, {"type": "null"}],
        "default": None,
        "description": "how many times; null for once.",
    }
    assert schema["additionalProperties"] is False
    bare = json_schema_of(place)  # without the docstring's descriptions
    assert bare["properties"]["p"] == {"$ref": "#/$defs/Point"} and bare["$defs"] == schema["$defs"]


def test_the_schema_is_valid_json_schema_and_takes_the_issues_arguments():
    needs_pydantic()
    try:
        import jsonschema
    except ImportError as exc:
        require("jsonschema", False, f"{exc}: pip install jsonschema")
    schema = FunctionTool(place).parameters()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert not list(validator.iter_errors({"p": {"a": {"x": 1}}, "n": None}))
    assert not list(validator.iter_errors({"p": {"a": {"x": 1}}, "n": 3}))
    assert list(validator.iter_errors({"p": {"a": {}}}))  # the $ref to Inner was followed


def test_bad_values_come_back_naming_each_field_and_what_it_should_be():
    needs_pydantic()
    answer = FunctionTool(place).call('{"p": {"a": {"x": "one"}, "label": 5}, "n": "3.5"}')
    assert answer.startswith("Error: place was called with arguments that do not fit: ")
    assert (
        "p.a.x: Input should be a valid integer, unable to parse string as an integer (got 'one')" in answer
    )
    assert "p.label: Input should be a valid string (got 5)" in answer
    assert "n: Input should be a valid integer, unable to parse string as an integer (got '3.5')" in answer
    assert answer.endswith("Fix them and call place again.")
    assert "p.a.x: Field required" in FunctionTool(place).call('{"p": {"a": {}}}')
    assert "unknown argument(s) q; missing p" in FunctionTool(place).call('{"q": 1}')  # as before


def test_an_async_function_gets_the_converted_arguments():
    needs_pydantic()
    tool = FunctionTool(place_later)
    assert json.loads(asyncio.run(tool.acall(THE_ISSUES_CALL)))["n"] == 3
    assert json.loads(tool.call(THE_ISSUES_CALL)) == {"p": "Point", "x": 1, "n": 3, "n_type": "int"}
    assert "got 'three'" in asyncio.run(tool.acall('{"p": {"a": {"x": 1}}, "n": "three"}'))


class Unschemable:  # a class pydantic makes no schema of: any value
    pass


def test_odd_parameters_names_defaults_and_types():
    needs_pydantic()
    sentinel = object()

    def odd(
        json: str,
        model_config: Annotated[int, "a number"],
        copy: int = None,  # type: ignore[assignment]  # noqa: RUF013 (a default of None takes null)
        thing: Unschemable | None = None,
        left: object = sentinel,
    ) -> list[Any]:
        return [json, model_config, copy, thing, left is sentinel]

    tool = FunctionTool(odd)
    properties = tool.parameters()["properties"]
    assert properties["model_config"] == {"type": "integer", "description": "a number"}
    assert properties["copy"]["anyOf"] == [{"type": "integer"}, {"type": "null"}]
    assert properties["thing"] == {"default": None}  # any value
    assert "default" not in properties["left"]  # not JSON: left out, not a warning
    assert json.loads(tool.call('{"json": "j", "model_config": "2", "copy": null}')) == [
        "j",
        2,
        None,
        None,
        True,
    ]


# -- without pydantic -----------------------------------------------------------


def optional(n: int | None = None, tags: list[str] | None = None, either: int | str | None = 1) -> list[Any]:
    return [n, tags, either]


def test_the_hand_written_schema_makes_optional_nullable():
    schema = _hand_schema(optional)
    assert schema["properties"] == {
        "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "tags": {
            "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
            "default": None,
        },
        "either": {"anyOf": [{"type": "integer"}, {"type": "string"}, {"type": "null"}], "default": 1},
    }
    assert schema["required"] == []


class SchemaOnly:
    """A class with a model's ``model_json_schema`` (its ``$defs`` inside), as a
    pydantic 1 style model would reach the hand-written schema."""

    @classmethod
    def model_json_schema(cls) -> dict[str, Any]:
        inner = {"type": "object", "properties": {"x": {"type": "integer"}}}
        return {"$defs": {"Inner": inner}, "type": "object", "properties": {"a": {"$ref": "#/$defs/Inner"}}}


def test_the_hand_written_schema_moves_a_models_defs_to_the_root():
    def use(s: SchemaOnly, many: list[SchemaOnly]) -> None: ...

    schema = _hand_schema(use)
    assert "$defs" not in schema["properties"]["s"] and "$defs" not in schema["properties"]["many"]["items"]
    assert resolve(schema, "#/$defs/Inner")["properties"]["x"] == {"type": "integer"}


def test_without_pydantic_the_tool_takes_null_for_optional():
    code = (
        "import sys, json\nsys.modules['pydantic'] = None\n"
        "from execbox.tools import FunctionTool\n"
        "from tests.tools.test_function_tool import optional\n"
        "tool = FunctionTool(optional)\n"
        'print(json.dumps([tool.parameters(), tool.call(\'{"n": null, "either": "x"}\'), '
        "'pydantic' in sys.modules and sys.modules['pydantic'] is not None]))\n"
    )
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": f"{root / 'src'}{os.pathsep}{root}{os.pathsep}{root / 'tests'}"},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    schema, answer, imported = json.loads(done.stdout)
    assert imported is False
    assert schema == _hand_schema(optional)
    assert json.loads(answer) == [None, None, "x"]


# -- through the agents ---------------------------------------------------------


def test_the_agents_send_the_fixed_schema_and_the_function_gets_a_point():
    needs_pydantic()
    arguments = json.loads(THE_ISSUES_CALL)
    expected = FunctionTool(place).parameters()
    with FakeModel([{"tool_calls": [{"name": "place", "arguments": arguments}]}, "Placed."]) as fake:
        model = ModelClient("gpt-4o-mini", base_url=fake.base_url, api_key="k")
        AssistantAgent("assistant", model, tools=[place]).run("place it")
        [sent] = fake.requests[0]["tools"]
        [result] = [m for m in fake.requests[1]["messages"] if m["role"] == "tool"]
    assert sent["function"]["name"] == "place" and sent["function"]["parameters"] == expected
    check_tool_schema(sent["function"]["parameters"])
    assert json.loads(result["content"]) == {"p": "Point", "x": 1, "n": 3, "n_type": "int"}

    with FakeAnthropic([{"tool_calls": [{"name": "place", "arguments": arguments}]}, "Placed."]) as fake:
        model = AnthropicClient("claude-sonnet-4-6", base_url=fake.base_url, api_key="k")
        AssistantAgent("assistant", model, tools=[place]).run("place it")
        [sent] = fake.requests[0]["tools"]
        result = fake.requests[1]["messages"][2]["content"][0]
    assert sent["name"] == "place" and sent["input_schema"] == expected
    check_tool_schema(sent["input_schema"])
    assert result["type"] == "tool_result"
    assert json.loads(result["content"]) == {"p": "Point", "x": 1, "n": 3, "n_type": "int"}
