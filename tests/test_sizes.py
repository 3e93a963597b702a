"""The sizes of issue 43, checked on the source: no module of ``execbox``
over 500 lines and no function or method over 80 (its docstring and
decorators' body lines count; the decorators themselves do not). A big
literal table is not a function, so it needs no rule; a function that is
one (generated code) goes in ``KNOWN_LONG`` with that reason.

``KNOWN_LONG`` names the functions known to be longer and left for later,
each with why; an entry that is no longer too long, or no longer exists,
fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "execbox"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80

# "path below src/execbox:qualified name" -> why it is still longer than
# MAX_FUNCTION_LINES (a nested function is "outer.inner", a method "Class.name")
KNOWN_LONG: dict[str, str] = {}


def _modules() -> Iterator[tuple[str, str]]:
    """(path below src/execbox, source) for every module."""
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), path.read_text(encoding="utf-8")


def _functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, int]]:
    """(qualified name, lines) of every function below ``node``, nested ones too."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = prefix + child.name
            yield name, (child.end_lineno or child.lineno) - child.lineno + 1
            yield from _functions(child, name + ".")
        elif isinstance(child, ast.ClassDef):
            yield from _functions(child, prefix + child.name + ".")
        else:
            yield from _functions(child, prefix)


def _all_functions() -> dict[str, int]:
    return {
        f"{where}:{name}": lines
        for where, source in _modules()
        for name, lines in _functions(ast.parse(source))
    }


def test_no_module_is_over_500_lines():
    long = [
        f"{where}: {n} lines"
        for where, source in _modules()
        if (n := len(source.splitlines())) > MAX_MODULE_LINES
    ]
    assert not long, (
        f"modules over {MAX_MODULE_LINES} lines; move one concept into a new private module "
        "(`_name.py` with `__all__`):\n" + "\n".join(long)
    )


def test_no_function_is_over_80_lines():
    long = [
        f"{name}: {lines} lines"
        for name, lines in sorted(_all_functions().items())
        if lines > MAX_FUNCTION_LINES and name not in KNOWN_LONG
    ]
    assert not long, (
        f"functions over {MAX_FUNCTION_LINES} lines; split them by meaning (named helpers, a "
        "dataclass for parameters that travel together):\n" + "\n".join(long)
    )


def test_every_known_long_function_has_a_reason():
    assert all(reason.strip() for reason in KNOWN_LONG.values()), "KNOWN_LONG: write why for each entry"


def test_the_known_long_functions_are_still_long():
    """An entry that was split (or removed) leaves KNOWN_LONG: the list only shrinks."""
    found = _all_functions()
    stale = [
        f"{name}: " + (f"{found[name]} lines" if name in found else "no longer exists")
        for name in sorted(KNOWN_LONG)
        if found.get(name, 0) <= MAX_FUNCTION_LINES
    ]
    assert not stale, "KNOWN_LONG names functions no longer over the limit; remove them:\n" + "\n".join(stale)
