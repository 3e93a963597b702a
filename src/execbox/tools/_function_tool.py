"""``FunctionTool``: any plain Python function as a tool a model can call,
its JSON schema read from the signature and the docstring.

    def add(a: int, b: int = 0) -> int:
        '''Add two numbers.

        Args:
            a: the first number.
            b: the second number.
        '''
        return a + b

    tool = FunctionTool(add)
    tool.openai_schema()        # {"type": "function", "function": {"name": "add", ...}}
    tool.call('{"a": 2, "b": 3}')   # "5"

Where pydantic 2 is installed (the ``agents`` extra brings it), the schema
is pydantic's, each model of the parameters in the root's ``$defs``, and
the arguments are checked and converted before the call
(``_pydantic_args``): a model arrives as the model, ``"3"`` for an ``int``
as 3 (lax mode), null where ``X | None``. Without it, type hints map to
JSON schema here (str, int, float, bool, list[...], dict, ``X | None`` as
nullable, ``Literal[...]``) and values are passed as sent. A parameter
without a default is required. Arguments a model gets wrong (not JSON,
missing, unknown, of the wrong type, nested deeper than
``_MAX_DEPTH`` levels, a function that raises) come back as
the call's text, naming what to fix; they never raise into the agent.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .._errors import ConfigurationError
from ._bounded_json import MAX_DEPTH, TooDeep, data_depth
from ._bounded_json import loads as bounded_loads

__all__ = ["FunctionTool", "json_schema_of", "tool_text"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SIMPLE = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    dict: "object",
    list: "array",
    tuple: "array",
    type(None): "null",
}
_ARG_LINE = re.compile(r"^\s*(?::param\s+)?\*{0,2}(\w+)(?:\s*\([^)]*\))?\s*:\s*(.*)$")


class FunctionTool:
    """A plain function (sync or async) as a tool: ``name`` (default the
    function's), ``description`` (default its docstring's first paragraph)."""

    def __init__(
        self, function: Callable[..., Any], *, name: str | None = None, description: str | None = None
    ) -> None:
        if not callable(function) or isinstance(function, type):
            raise ConfigurationError(f"FunctionTool takes a function, not {function!r}")
        self.function = function
        self.name: str = name if name else getattr(function, "__name__", "")
        if not _NAME.match(self.name):
            raise ConfigurationError(
                f"tool name {self.name!r}: use 1 to 64 letters, digits, '_' or '-' (name=...)"
            )
        summary, helps = _docstring(inspect.getdoc(function) or "")
        self.description = description or summary or f"Call {self.name}."
        self._checked = _checked_arguments(function, helps)
        self._schema = self._checked.schema if self._checked else _hand_schema(function, helps)
        self.workspace_path: str | None = None  # set on the workspace's file tools

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r})"

    def parameters(self) -> dict[str, Any]:
        return json.loads(json.dumps(self._schema))

    def openai_schema(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters()},
        }

    def anthropic_schema(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": self.parameters()}

    def call(self, arguments: str | bytes | Mapping[str, Any]) -> str:
        """Call with a model's arguments (JSON text or a dict); the result as text."""
        kwargs = self._arguments(arguments)
        if isinstance(kwargs, str):
            return kwargs
        try:
            value = self.function(**kwargs)
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
        except Exception as exc:  # noqa: BLE001 (the model reads it and can try again)
            return f"Error: {self.name} raised {type(exc).__name__}: {exc}"
        return tool_text(value)

    async def acall(self, arguments: str | bytes | Mapping[str, Any]) -> str:
        kwargs = self._arguments(arguments)
        if isinstance(kwargs, str):
            return kwargs
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await self.function(**kwargs)
            else:
                value = await asyncio.to_thread(self.function, **kwargs)
        except Exception as exc:  # noqa: BLE001 (as in __call__)
            return f"Error: {self.name} raised {type(exc).__name__}: {exc}"
        return tool_text(value)

    def _arguments(self, arguments: str | bytes | Mapping[str, Any]) -> dict[str, Any] | str:
        """The keyword arguments, or the text telling the model what is wrong."""
        try:
            if isinstance(arguments, (str, bytes)):
                arguments = bounded_loads(arguments or "{}")
            elif (depth := data_depth(arguments)) > MAX_DEPTH:
                raise TooDeep(depth)
        except TooDeep as exc:
            return (
                f"Error: the arguments of {self.name} nest {exc.depth} levels deep; "
                f"send them nested at most {MAX_DEPTH} levels."
            )
        except ValueError as exc:
            return f"Error: the arguments of {self.name} are not JSON ({exc}); send a JSON object."
        if not isinstance(arguments, Mapping):
            return (
                f"Error: the arguments of {self.name} must be a JSON object, not {type(arguments).__name__}."
            )
        known = self._schema["properties"]
        unknown = sorted(set(arguments) - set(known))
        missing = [n for n in self._schema.get("required", []) if n not in arguments]
        if unknown or missing:
            parts = ([f"unknown argument(s) {', '.join(unknown)}"] if unknown else []) + (
                [f"missing {', '.join(missing)}"] if missing else []
            )
            return (
                f"Error: {self.name} was called with {'; '.join(parts)}. "
                f"Its arguments: {', '.join(known) or 'none'}."
            )
        if self._checked is None:
            return dict(arguments)
        converted = self._checked.validate(arguments)
        if isinstance(converted, list):
            return (
                f"Error: {self.name} was called with arguments that do not fit: {'; '.join(converted)}. "
                f"Fix them and call {self.name} again."
            )
        return converted


def _checked_arguments(function: Callable[..., Any], helps: Mapping[str, str]) -> Any:
    """The pydantic ``Arguments`` of the function (its schema, the check and
    conversion of what a model sends), or None without pydantic 2."""
    try:
        from ._pydantic_args import Arguments
    except ImportError:
        return None
    return Arguments(function, helps)


async def _awaited(value: Any) -> Any:
    return await value


# What JSON leaves raw with ensure_ascii=False, though a reader takes it for a
# line break (U+2028, U+2029, NEL U+0085) or a terminal for a control code (DEL, C1)
_RAW_BREAKS = re.compile("[\x7f-\x9f\u2028\u2029]")


def tool_text(value: Any) -> str:
    """A tool's return value as the text sent back to the model: JSON for
    anything but a string, in which no character of a value (a block's
    output, a file name, an error) starts a line of its own."""
    if isinstance(value, str):
        return value
    try:
        text = json.dumps(value, default=str, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
    return _RAW_BREAKS.sub(lambda found: f"\\u{ord(found.group()):04x}", text)


def json_schema_of(function: Callable[..., Any], helps: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The JSON schema of a function's keyword arguments: pydantic's, where
    pydantic 2 is installed, else written from the type hints here."""
    checked = _checked_arguments(function, helps or {})
    return checked.schema if checked else _hand_schema(function, helps)


def _hand_schema(function: Callable[..., Any], helps: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The schema without pydantic, from the type hints the module's docstring lists."""
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function)
    except Exception:  # noqa: BLE001 (an annotation that cannot be resolved: described as any value)
        hints = {}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, parameter in signature.parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or name in ("self", "cls"):
            continue
        schema = _type_schema(hints.get(name, Any))
        if helps and helps.get(name):
            schema["description"] = helps[name]
        if parameter.default is parameter.empty:
            required.append(name)
        elif parameter.default is None or isinstance(parameter.default, (str, int, float, bool)):
            schema["default"] = parameter.default
        properties[name] = schema
    found: dict[str, Any] = {}
    for schema in properties.values():
        _hoist(schema, found)
    return {"type": "object", "properties": properties, "required": required, **found}


def _hoist(schema: Any, found: dict[str, Any]) -> None:
    """Move the ``$defs`` (``definitions``) of a model's schema within a
    parameter's into ``found``, for the root, where their ``$ref`` points."""
    if not isinstance(schema, dict):
        return
    for key in ("$defs", "definitions"):
        if isinstance(schema.get(key), dict):
            found.setdefault(key, {}).update(schema.pop(key))
    for key in ("items", "anyOf", "additionalProperties"):
        value = schema.get(key)
        for inner in value if isinstance(value, list) else [value]:
            _hoist(inner, found)


def _type_schema(hint: Any) -> dict[str, Any]:
    if hint is Any or hint is inspect.Parameter.empty:
        return {}
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Annotated:
        schema = _type_schema(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return {**schema, "description": notes[0]} if notes else schema
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        schemas = [_type_schema(a) for a in args if a is not type(None)]
        if {} in schemas:
            return {}  # any value, null too
        if len(schemas) < len(args):
            schemas.append({"type": "null"})  # X | None: null is a value
        return schemas[0] if len(schemas) == 1 else {"anyOf": schemas}
    if origin in (list, tuple, set, frozenset) or origin is typing.get_origin(list[int]):
        item = _type_schema(args[0]) if args and args[0] is not Ellipsis else {}
        return {"type": "array", "items": item} if item else {"type": "array"}
    if origin is dict:
        return {"type": "object"}
    to_schema = getattr(hint, "model_json_schema", None)
    if callable(to_schema):
        return to_schema()
    return {}


def _docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(summary, {parameter: help}) from a Google-style ``Args:`` section or
    reST ``:param x:`` lines."""
    summary = doc.split("\n\n", 1)[0].strip().replace("\n", " ")
    helps: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:", "params:"):
            in_args = True
            continue
        if stripped.startswith(":param "):
            match = _ARG_LINE.match(stripped)
            if match:
                helps[match.group(1)] = match.group(2).strip()
            continue
        if in_args:
            if not stripped or (stripped.endswith(":") and not line.startswith((" ", "\t"))):
                in_args = bool(stripped) and False
                continue
            match = _ARG_LINE.match(line)
            if match and line.startswith((" ", "\t")) and len(line) - len(line.lstrip()) <= 8:
                helps[match.group(1)] = match.group(2).strip()
            elif helps:
                last = list(helps)[-1]
                helps[last] = f"{helps[last]} {stripped}"
    return (summary if not summary.lower().startswith(("args:", ":param")) else ""), helps
