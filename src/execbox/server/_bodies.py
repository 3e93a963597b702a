"""The request bodies of the JSON routes, declared once as typed models:
the OpenAPI document's component schemas are generated from them
(``_openapi_schemas``), and ``checked`` validates a parsed body against one,
answering what is wrong as a 400 in the one error shape.

The rules they keep (those of the hand-written checks they replace):
strict types (``"3"`` is not 3, ``true`` is not 1; an integer is a number;
but ``/run_code``'s limits, as SandboxFusion's own model takes them);
a null field is an absent one; unknown fields are ignored, except in
``limits`` and in a judge case, which refuse them. What depends on the
server (its backends, maxima, ``--allow-gpus``) or on more than one field
(``code`` or ``blocks``) is checked by the route after the model."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError

from ._errors import ApiError
from ._sandbox_fusion_languages import SANDBOX_FUSION_LANGUAGES

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "MAX_CASES",
    "REQUEST_MODELS",
    "SANDBOX_FUSION_LANGUAGES",
    "BatchRequest",
    "Block",
    "ExecutionRequest",
    "ExtractRequest",
    "FileSpec",
    "JudgeRequest",
    "Limits",
    "RunCodeRequest",
    "RunRequest",
    "SessionRequest",
    "checked",
]

MAX_CASES = 1000  # test cases in one /v1/judge request
DEFAULT_TIMEOUT_S = 10.0  # SandboxFusion's default compile_timeout and run_timeout


class Body(BaseModel):
    """Strict types; unknown fields ignored (as the hand-written checks ignored them)."""

    model_config = ConfigDict(strict=True, extra="ignore")


class Closed(Body):
    """Unknown fields refused (``limits``, a judge case)."""

    model_config = ConfigDict(strict=True, extra="forbid")


class Block(Body):
    code: str
    language: str | None = None
    filename: str | None = None
    stdin: str | None = Field(None, description="the program's standard input")


class FileSpec(Body):
    content: str
    encoding: Literal["utf-8", "base64"] = "utf-8"


class Limits(Closed):
    """Over the server's defaults, within its maxima (else 400 invalid_limits)."""

    timeout_s: float | None = None
    memory_mb: int | None = None
    max_processes: int | None = None
    max_output_bytes: int | None = None
    network: bool | None = None
    cpus: float | None = None
    gpu_memory_mb: int | None = None
    compile_timeout_s: float | None = None


Files = Annotated[
    dict[str, FileSpec | str] | None,
    Field(description="workspace path -> file ({content, encoding?}, or a string: UTF-8 text)"),
]
Gpus = Annotated[
    str | int | list[str | int] | Literal[False] | None,
    Field(
        description="NVIDIA GPUs for the blocks (sandbox, docker): 'all', an index, a UUID, or a list; "
        "within the server's --allow-gpus; false or null: none"
    ),
]


class ExecutionRequest(Body):
    """Give code or blocks."""

    language: str | None = "python"
    code: str | None = None
    stdin: str | None = Field(None, description="the program's standard input (with code)")
    blocks: list[Block] | None = None


class RunRequest(ExecutionRequest):
    """Give code or blocks."""

    files: Files = None
    limits: Limits | None = None
    backend: str | None = None
    fetch_files: list[str] | None = None
    gpus: Gpus = None


class BatchRequest(Body):
    # not validated here: each item is checked on its own (``checked(RunRequest, item)``),
    # so that a request that is not valid answers its own line; the route checks the list
    requests: Annotated[SkipValidation[list[RunRequest]], Field(json_schema_extra={"minItems": 1})]
    max_concurrency: Annotated[int | None, Field(ge=1)] = None


class Checker(Body):
    code: str
    language: str | None = None


class JudgeCase(Closed):
    stdin: str | None = None
    expected_stdout: str | None = None
    checker: Checker | None = None
    name: str | None = None


class JudgeRequest(Body):
    code: str
    language: str
    cases: Annotated[list[JudgeCase], Field(min_length=1, max_length=MAX_CASES)]
    compare: Literal["lines", "exact", "whitespace", "float"] | None = "lines"
    tolerance: float | None = 1e-6
    stop_on_failure: bool | None = True
    limits: Limits | None = None
    backend: str | None = None
    gpus: Gpus = None


class SessionRequest(Body):
    backend: str | None = None
    limits: Limits | None = None
    gpus: Gpus = None
    ttl_s: float | None = None
    idle_ttl_s: float | None = None
    env: dict[str, str] | None = None
    files: Files = None
    keep_code_files: bool | None = None
    execution_policies: Annotated[
        dict[str, Literal["execute", "save", "refuse"]] | None,
        Field(description="language -> execute | save | refuse"),
    ] = None


# SandboxFusion's own model (pydantic, not strict) takes a number in a string
# ("5", "7.5") and a whole float for an integer (256.0): so do its limits here
Seconds = Annotated[float | None, Field(strict=False, description="seconds (a number, or one in a string)")]
Megabytes = Annotated[
    int | None, Field(strict=False, description="MB (a whole number, or one in a string); -1, 0: the default")
]


class RunCodeRequest(Body):
    """SandboxFusion's /run_code request. Its limits are held to this
    server's maxima, not refused (the X-Execbox-Clamped header says so)."""

    code: str
    language: Annotated[str, Field(examples=list(SANDBOX_FUSION_LANGUAGES))]
    stdin: str | None = None
    compile_timeout: Seconds = DEFAULT_TIMEOUT_S
    run_timeout: Seconds = DEFAULT_TIMEOUT_S
    memory_limit_MB: Megabytes = -1
    files: Annotated[
        dict[str, str | None] | None, Field(description="workspace path -> base64 content (null: skipped)")
    ] = None
    fetch_files: list[str] | None = None


class ExtractRequest(Body):
    text: str = Field(description="the model's reply")


REQUEST_MODELS: tuple[type[BaseModel], ...] = (
    RunRequest,
    BatchRequest,
    JudgeRequest,
    SessionRequest,
    ExecutionRequest,
    RunCodeRequest,
    ExtractRequest,
)

M = TypeVar("M", bound=BaseModel)


def checked(model: type[M], data: Any) -> M:
    """``data`` (a parsed JSON body) as ``model``, or a 400 naming the first
    field that is wrong and what it must be (``invalid_limits`` in ``limits``)."""
    if not isinstance(data, dict):
        raise ApiError(400, "bad_request", "the body must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _as_api_error(model, exc) from None


# pydantic names the member of a union that failed in the location: not a field
_TAGS = {"str", "int", "float", "bool", "none", "list", "dict"}
_PHRASES = {
    "missing": "is required",
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "list_type": "must be an array",
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
}


def _as_api_error(model: type[BaseModel], exc: ValidationError) -> ApiError:
    errors = exc.errors(include_url=False)
    names = {m.__name__ for m in _models_in(model)}
    where = _where(errors[0]["loc"], names)
    same = [e for e in errors if _where(e["loc"], names) == where]  # a union's members: "a string or ..."
    phrases = list(dict.fromkeys(_phrase(e, model, names) for e in same))
    if all(p.startswith("must be ") for p in phrases):  # "must be an object or a string"
        phrases = [phrases[0], *(p.removeprefix("must be ") for p in phrases[1:])]
    shown = where or "the body"
    code = "invalid_limits" if where.startswith("limits") else "bad_request"
    given = "" if same[0]["type"] in ("missing", "extra_forbidden") else f" (got {_shown(same[0]['input'])})"
    return ApiError(400, code, f"{shown!r} {' or '.join(phrases)}{given}")


def _where(loc: tuple[int | str, ...], names: set[str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in _TAGS or part in names or "[" in part:
            continue
        elif part.isidentifier():
            text += f".{part}" if text else part
        else:
            text += f"[{part!r}]"
    return text


def _phrase(error: Any, model: type[BaseModel], names: set[str]) -> str:
    kind = error["type"]
    if kind in _PHRASES:
        return _PHRASES[kind]
    context = error.get("ctx") or {}
    if kind == "too_long":
        return f"has {context.get('actual_length')} items: at most {context.get('max_length')}"
    if kind == "too_short":
        return f"has too few items: at least {context.get('min_length')}"
    if kind == "greater_than_equal":
        return f"must be at least {context.get('ge')}"
    if kind == "extra_forbidden":
        fields = _fields_at(model, error["loc"][:-1])
        return "is not a field here" + (f": use {', '.join(sorted(fields))}" if fields else "")
    message = str(error["msg"]).replace("Input should be", "must be").replace("Value should", "must")
    return message[:1].lower() + message[1:]


def _fields_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The fields of the model at ``loc`` (a sub-model's), or [] when it is not one."""
    current: Any = model
    for part in loc:
        if isinstance(part, int) or not (isinstance(current, type) and issubclass(current, BaseModel)):
            continue
        field = current.model_fields.get(part)
        if field is None:
            return []
        found = [m for m in _models_in(field.annotation) if m is not current]
        current = found[0] if found else None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models named in a type (itself, or inside a list, dict or union), outermost first."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        inner = [m for f in annotation.model_fields.values() for m in _models_in(f.annotation)]
        return [annotation, *inner]
    args = getattr(annotation, "__args__", ()) or ()
    return [m for arg in args for m in _models_in(arg)]


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
