"""The server's answers read as hostile: JSON parsed without letting its
depth crash the client, ids that name nothing but an id, and a result or an
event whose every field has the type this client reads, each checked before
it becomes an object. A wrong shape is a ``ServiceError`` (code
``bad_answer``) naming the field and what it held, never a ``KeyError`` or a
``RecursionError`` from deep inside. No I/O here.

A ``files`` path a result names is a string here and nothing more: where it
is written on this machine is the workspace's business (``Workspace``
refuses ``..``, absolute paths and links).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .._errors import ServiceError

__all__ = ["check_event", "check_id", "check_judged", "check_result", "parse_json"]

# A session's or an execution's id as the server makes them ("s_" + hex):
# an id goes into the URLs of later requests, so that nothing else may.
_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
_INT64 = 2**63


def bad_answer(what: str, problem: str) -> ServiceError:
    return ServiceError(
        f"{what}: {problem} (is this execbox serve, and of a version this client reads? "
        "upgrade the client, or check Client(base_url=...))",
        code="bad_answer",
    )


def parse_json(body: bytes | str, what: str) -> Any:
    """``body`` parsed; a body that is not JSON, or nested too deep to parse, is bad_answer."""
    try:
        return json.loads(body)
    except RecursionError:
        raise bad_answer(what, "the JSON is nested too deep to read") from None
    except ValueError:
        text = body[:200] if isinstance(body, str) else body[:200].decode("utf-8", "replace")
        raise bad_answer(what, f"the body is not JSON: {text!r}") from None


def check_id(value: Any, what: str) -> str:
    """An id the server gave, to be put in a URL: letters, digits, _ and - only."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise bad_answer(what, f"the id {value!r:.80} is not an id (letters, digits, _ and -, at most 128)")
    return value


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -_INT64 < value < _INT64


def _seconds(value: Any) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    return number and math.isfinite(value) and value >= 0


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _error(value: Any) -> bool:
    if value is None:
        return True
    return isinstance(value, Mapping) and all(
        isinstance(value.get(key, ""), str) for key in ("name", "value", "traceback")
    )


def _text_or_none(value: Any) -> bool:
    return value is None or isinstance(value, str)


def _displays(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, Mapping)
        and isinstance(item.get("mime_type"), str)
        and _text_or_none(item.get("path"))
        and _text_or_none(item.get("data"))
        for item in value
    )


# Each field a result may carry, and what it must be (a field left out takes its default).
_RESULT = {
    "exit_code": (_int, "an integer"),
    "output": (str, "a string"),
    "stdout": (str, "a string"),
    "stderr": (str, "a string"),
    "error": (_error, "null or {name, value, traceback} strings"),
    "displays": (_displays, "a list of {mime_type, ...}"),
    "files": (_strings, "a list of paths"),
    "files_truncated": (bool, "true or false"),
    "code_files": (_strings, "a list of paths"),
    "duration_s": (_seconds, "a number of seconds, 0 or more"),
    "timed_out": (bool, "true or false"),
    "truncated": (bool, "true or false"),
    "backend": (str, "a string"),
    "node": (str, "a string"),
}
_BLOCK = {
    **_RESULT,
    "index": (_int, "an integer"),
    "language": (str, "a string"),
    "status": (str, "a string"),
    "language_inferred": (bool, "true or false"),
    "code_file": (_text_or_none, "null or a path"),
    "peak_memory_mb": (lambda v: v is None or _seconds(v), "null or a number of MB, 0 or more"),
}
# A judge's answer (/v1/judge) and each of its cases.
_JUDGED = {
    "verdict": (str, "a string"),
    "language": (str, "a string"),
    "passed": (_int, "an integer"),
    "total": (_int, "an integer"),
    "duration_s": (_seconds, "a number of seconds, 0 or more"),
    "backend": (str, "a string"),
    "compile_output": (str, "a string"),
}
_CASE = {
    "index": (_int, "an integer"),
    "name": (str, "a string"),
    "verdict": (str, "a string"),
    "time_s": (_seconds, "a number of seconds, 0 or more"),
    "peak_memory_mb": (lambda v: v is None or _seconds(v), "null or a number of MB, 0 or more"),
    "exit_code": (lambda v: v is None or _int(v), "null or an integer"),
    "stdout": (str, "a string"),
    "stderr": (str, "a string"),
    "message": (str, "a string"),
}

_EVENTS: dict[str, dict[str, tuple[Any, str]]] = {
    "start": {"blocks": (_int, "an integer"), "execution_id": (_text_or_none, "a string")},
    "stdout": {"text": (str, "a string"), "block": (_int, "an integer")},
    "block_start": {"index": (_int, "an integer"), "language": (str, "a string")},
    "block_end": {
        "index": (_int, "an integer"),
        "exit_code": (_int, "an integer"),
        "status": (str, "a string"),
        "error": (_error, "null or {name, value, traceback}"),
    },
    "display": {
        "mime_type": (str, "a string"),
        "block": (_int, "an integer"),
        "path": (_text_or_none, "null or a path"),
        "data": (_text_or_none, "null or a string"),
    },
    "end": {
        "status": (str, "a string"),
        "result": (lambda v: v is None or isinstance(v, Mapping), "null or a result object"),
    },
}
_EVENTS["stderr"] = _EVENTS["stdout"]
_EVENTS["truncated"] = {"after_bytes": (_int, "an integer"), "note": (str, "a string")}


def _check(
    data: Any, fields: Mapping[str, tuple[Any, str]], what: str, required: tuple[str, ...] = ()
) -> None:
    if not isinstance(data, Mapping):
        raise bad_answer(what, f"it is {type(data).__name__}, not a JSON object")
    for name in required:
        if name not in data:
            raise bad_answer(what, f"it has no {name!r}")
    for name, (kind, meaning) in fields.items():
        if name not in data:
            continue
        value = data[name]
        ok = isinstance(value, kind) if isinstance(kind, type) else kind(value)
        if not ok:
            raise bad_answer(what, f"its {name!r} must be {meaning}, not {value!r:.80}")


def check_result(data: Any, what: str) -> Any:
    """``data`` (a result as the server sends it), checked field by field, its blocks too."""
    _check(data, _RESULT, what, required=("exit_code", "output"))
    blocks = data.get("blocks", [])
    if not isinstance(blocks, list):
        raise bad_answer(what, f"its 'blocks' must be a list, not {blocks!r:.80}")
    for index, block in enumerate(blocks):
        _check(
            block,
            _BLOCK,
            f"{what}, block {index}",
            required=("index", "language", "status", "exit_code", "output"),
        )
    return data


def check_event(kind: str, data: Any, what: str) -> None:
    """The data of a known event kind, checked (an end's result too); unknown kinds pass."""
    _check(data, _EVENTS.get(kind, {}), what)
    if kind == "end" and data.get("result") is not None:
        check_result(data["result"], f"{what}, its result")


def check_judged(data: Any, what: str) -> Any:
    """A judge's answer, checked field by field, its cases too."""
    _check(data, _JUDGED, what, required=("verdict", "language"))
    cases = data.get("cases", [])
    if not isinstance(cases, list):
        raise bad_answer(what, f"its 'cases' must be a list, not {cases!r:.80}")
    for index, case in enumerate(cases):
        _check(case, _CASE, f"{what}, case {index}", required=("index", "verdict"))
    return data
