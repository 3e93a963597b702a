"""Host-defined functions that the model's code can import.

``FunctionSet([add, "import math", ...])`` turns plain functions (and source
snippets, e.g. the imports they need) into a module the block imports
(``from functions import add``) and into a text that tells a model what is
there, for its system prompt.
"""

from __future__ import annotations

import ast
import inspect
import keyword
import textwrap
from collections.abc import Callable, Sequence

from ._errors import ConfigurationError

__all__ = ["FunctionSet"]


class FunctionSet:
    def __init__(self, functions: Sequence[Callable[..., object] | str], module: str = "functions") -> None:
        if not module.isidentifier() or keyword.iskeyword(module):
            raise ConfigurationError(f"functions module name {module!r} is not a Python identifier")
        self.module = module
        self._sources: list[str] = []
        self._signatures: list[str] = []
        for item in functions:
            if isinstance(item, str):
                self._sources.append(textwrap.dedent(item).strip() + "\n")
            elif inspect.isfunction(item):
                self._add_function(item)
            else:
                raise ConfigurationError(
                    f"functions=[...] takes plain functions or source strings, not {item!r}"
                )
        source = self.source()
        try:
            ast.parse(source)
        except SyntaxError as exc:
            raise ConfigurationError(f"the functions given do not make a valid module: {exc}") from None

    def _add_function(self, func: Callable[..., object]) -> None:
        name = func.__name__
        if name == "<lambda>":
            raise ConfigurationError("functions=[...] cannot take a lambda: define it with def")
        try:
            source = textwrap.dedent(inspect.getsource(func))
        except (OSError, TypeError):
            raise ConfigurationError(
                f"the source of function {name!r} is not available: define it in a file, "
                "or pass its source as a string"
            ) from None
        lines = source.splitlines()
        while lines and lines[0].lstrip().startswith("@"):  # decorators belong to the host
            lines.pop(0)
        self._sources.append("\n".join(lines) + "\n")
        doc = inspect.getdoc(func)
        signature = _signature("\n".join(lines), name)
        if doc:
            signature += "\n" + textwrap.indent(f'"""{doc}"""', "    ")
        self._signatures.append(signature)

    def __bool__(self) -> bool:
        return bool(self._sources)

    def source(self) -> str:
        """The module's text."""
        return "\n\n".join(self._sources)

    def prompt(self) -> str:
        """A description of the functions for a model's prompt."""
        if not self._signatures:
            return ""
        example = self._signatures[0].split("(")[0].removeprefix("def ")
        return (
            f"These functions are available in the Python module `{self.module}`; import them "
            f"in your code (for example `from {self.module} import {example}`):\n\n"
            + "\n\n".join(self._signatures)
        )


def _signature(source: str, name: str) -> str:
    """The ``def`` line as written (annotations as in the source, not as
    strings or objects)."""
    node = next(n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
    prefix = "async def" if isinstance(node, ast.AsyncFunctionDef) else "def"
    returns = f" -> {ast.unparse(node.returns)}" if node.returns is not None else ""
    return f"{prefix} {name}({ast.unparse(node.args)}){returns}:"
