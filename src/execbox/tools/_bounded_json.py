"""JSON a model wrote (a tool call's arguments, a structured reply), read
with its nesting bounded before it is parsed.

CPython's ``json`` parser recurses once per level of nesting, so 100,000
levels of ``[`` or ``{"a":`` raise ``RecursionError`` from deep inside it
(and a value that deep breaks ``repr``, pydantic's error messages and
``json.dumps`` later). ``loads`` measures the nesting first, in one pass and
without recursion, and refuses text deeper than ``MAX_DEPTH`` levels with
``TooDeep``, a ``ValueError`` as for text that is not JSON; ``data_depth``
measures data already parsed (a dict handed to ``FunctionTool.call``) the
same way, with an explicit stack.

    loads('{"a": [1, 2]}')          # {'a': [1, 2]}
    loads("[" * 100_000)            # TooDeep: nested 100000 levels deep, ...
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import accumulate
from typing import Any

__all__ = ["MAX_DEPTH", "TooDeep", "data_depth", "loads", "text_depth"]

MAX_DEPTH = 100  # levels of arrays and objects, the outermost one counted
# a JSON string: what lies in it is no bracket (an unclosed one runs to the end, read once)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class TooDeep(ValueError):
    """JSON nested deeper than ``MAX_DEPTH`` levels; ``depth``: how deep."""

    def __init__(self, depth: int) -> None:
        self.depth = depth
        super().__init__(
            f"nested {depth} levels deep, more than the {MAX_DEPTH} levels read: send flatter JSON"
        )


def text_depth(text: str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (0: none), read
    in one pass with no recursion. For text that is not JSON, at least the
    depth ``json.loads`` reaches before it fails."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def data_depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep the mappings, lists and tuples of ``value`` nest (0: none),
    walked with a stack of its own; it stops once past ``limit`` (a value
    that contains itself is as deep as that)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        if depth > limit:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def loads(text: str | bytes | bytearray) -> Any:
    """``json.loads(text)``, or ``TooDeep`` (a ValueError) when the text
    nests deeper than ``MAX_DEPTH``; bytes are decoded as ``json`` does."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode(json.detect_encoding(text), "surrogatepass")
    depth = text_depth(text)
    if depth > MAX_DEPTH:
        raise TooDeep(depth)
    return json.loads(text)
