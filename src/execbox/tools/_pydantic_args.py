"""A ``FunctionTool``'s arguments with pydantic (v2), where it is installed
(it comes with the ``agents`` extra): the parameters' JSON schema and the
check and conversion of what a model sends, both from one pydantic model
made from the function's signature.

    def place(p: Point, n: int | None = None) -> str: ...

    arguments = Arguments(place, {})
    arguments.schema        # {"type": "object", "properties": {"p": {"$ref": "#/$defs/Point"}, ...},
                            #  "required": ["p"], "additionalProperties": false, "$defs": {...}}
    arguments.validate({"p": {"a": {"x": 1}}, "n": "3"})   # {"p": Point(...), "n": 3}
    arguments.validate({"p": {"a": {"x": "one"}}})         # ["p.a.x: Input should be ..."]

Every model the parameters use sits in the ``$defs`` at the schema's root,
so each ``$ref`` resolves (as the OpenAI and Anthropic tool schemas need).
Values are checked in pydantic's lax mode: ``"3"`` for an ``int`` becomes
3, ``"3.5"`` or ``"three"`` is refused. Importing this module without
pydantic v2 raises ImportError, and ``FunctionTool`` writes the schema by
hand instead.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

import pydantic
from pydantic.json_schema import GenerateJsonSchema

if not hasattr(pydantic, "TypeAdapter"):  # pydantic 1
    raise ImportError(f"pydantic {pydantic.VERSION} is not pydantic 2")

__all__ = ["Arguments"]

_SKIPPED = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
_SHOWN = 80  # characters of a refused value quoted back to the model


class _ToolSchema(GenerateJsonSchema):
    """Pydantic's JSON schema without the ``title`` of every field (words a
    model reads for nothing) and without a warning for a default JSON
    cannot show (it is left out of the schema)."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def emit_warning(self, kind: Any, detail: str) -> None:
        return None


class Arguments:
    """The schema of ``function``'s keyword arguments (``helps``: each
    parameter's description) and ``validate``, which turns a model's
    arguments into the values to call it with."""

    def __init__(self, function: Callable[..., Any], helps: Mapping[str, str]) -> None:
        try:
            hints = typing.get_type_hints(function, include_extras=True)
        except Exception:  # noqa: BLE001 (an annotation that cannot be resolved: any value)
            hints = {}
        fields: dict[str, Any] = {}
        self._parameters: dict[str, str] = {}  # model field -> parameter name
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.kind in _SKIPPED or name in ("self", "cls"):
                continue
            hint = _usable(hints.get(name, Any))
            if parameter.default is None and not _accepts_none(hint):
                hint = typing.Optional[hint]  # noqa: UP045 (a value, not an annotation)
            default = ... if parameter.default is parameter.empty else parameter.default
            description = helps.get(name) or _note(hints.get(name))
            # an alias, so that a parameter may be called json, copy or model_x
            fields[f"f_{name}"] = (hint, pydantic.Field(default, alias=name, description=description))
            self._parameters[f"f_{name}"] = name
        self.model: type[pydantic.BaseModel] = pydantic.create_model(
            "Arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        made = self.model.model_json_schema(by_alias=True, schema_generator=_ToolSchema)
        made.pop("title", None)
        self.schema: dict[str, Any] = {
            "type": "object",
            "properties": made.pop("properties", {}),
            "required": made.pop("required", []),
            **{k: v for k, v in made.items() if k != "type"},
        }

    def validate(self, arguments: Mapping[str, Any]) -> dict[str, Any] | list[str]:
        """The keyword arguments converted (a model's fields as the model,
        ``"3"`` for an ``int`` as 3), those not sent left to the function's
        defaults; or, when some do not fit, one line per bad value."""
        try:
            made = self.model.model_validate(dict(arguments))
        except pydantic.ValidationError as exc:
            return [_problem(error) for error in exc.errors(include_url=False)]
        given = made.model_fields_set
        return {name: getattr(made, field) for field, name in self._parameters.items() if field in given}


def _usable(hint: Any) -> Any:
    """``hint``, or ``Any`` where pydantic can make no JSON schema of it (a
    class of the function's own, say)."""
    try:
        pydantic.TypeAdapter(hint).json_schema()
    except (pydantic.PydanticUserError, TypeError, ValueError, NameError):
        return Any
    return hint


def _accepts_none(hint: Any) -> bool:
    try:
        pydantic.TypeAdapter(hint).validate_python(None)
    except pydantic.ValidationError:
        return False
    return True


def _note(hint: Any) -> str | None:
    """The description of ``Annotated[str, "the text"]``."""
    if typing.get_origin(hint) is typing.Annotated:
        notes = [a for a in typing.get_args(hint)[1:] if isinstance(a, str)]
        return notes[0] if notes else None
    return None


def _problem(error: Any) -> str:
    """``p.a.x: Input should be a valid integer (got 'one')``."""
    where = ""
    for part in error.get("loc", ()):
        where += f"[{part}]" if isinstance(part, int) else f".{part}" if where else str(part)
    text = f"{where or 'the arguments'}: {error.get('msg', 'is not valid')}"
    if error.get("type") not in ("missing", "extra_forbidden") and "input" in error:
        shown = repr(error["input"])
        text += f" (got {shown[:_SHOWN]}{'...' if len(shown) > _SHOWN else ''})"
    return text
