"""Host-defined functions that the model's code can import.

``FunctionSet([add, "import math", ...])`` turns plain functions (and source
snippets, e.g. the imports they need) into a module the block imports
(``from functions import add``) and into a text that tells a model what is
there, for its system prompt.

It also takes AG2's and AutoGen's ``FunctionWithRequirements`` (a function
decorated with ``@with_requirements(python_packages=[...],
global_imports=[...])``) and ``FunctionWithRequirementsStr`` (the same with
the function's source), read by their attributes, no framework imported:
their global imports head the module, and their packages are ``packages``,
for the executor to provide (``environments._packages``). A global import
that fails where the blocks run is refused when the executor starts
(``import_probe`` runs there, ``import_error`` names the import), as AG2
refuses such functions, rather than failing every block that imports them.
"""

from __future__ import annotations

import ast
import inspect
import json
import keyword
import textwrap
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeGuard

from .._errors import ConfigurationError

__all__ = ["FunctionSet"]

# The line the import probe prints its findings on.
_PROBE_MARK = "execbox-import-probe:"


class FunctionSet:
    def __init__(
        self, functions: Sequence[Callable[..., object] | str], module: str | None = "functions"
    ) -> None:
        if module is None:  # AG2's executors take None for their default name
            module = "functions"
        if not isinstance(module, str) or not module.isidentifier() or keyword.iskeyword(module):
            raise ConfigurationError(
                f"functions_module={module!r} is not a module name: give a Python identifier such as "
                "'functions' (the default), which blocks import the functions from"
            )
        self.module = module
        self._imports: list[str] = []
        self._sources: list[str] = []
        self._signatures: list[str] = []
        self._import_owners: dict[str, list[str]] = {}  # global import -> the functions needing it
        packages: list[str] = []
        for item in functions:
            if isinstance(item, str):
                self._sources.append(textwrap.dedent(item).strip() + "\n")
            elif inspect.isfunction(item):
                self._add_function(item)
            elif _has_requirements(item):
                packages += [p for p in _packages(item) if p not in packages]
                for line in map(_import_line, item.global_imports):
                    self._import_owners.setdefault(line, []).append(_function_name(item.func))
                    if line not in self._imports:
                        self._imports.append(line)
                if isinstance(item.func, str):
                    self._add_source(textwrap.dedent(item.func), None)
                else:
                    self._add_function(item.func)
            else:
                raise ConfigurationError(
                    f"functions=[...] takes plain functions, source strings, or AG2's / AutoGen's "
                    f"FunctionWithRequirements (@with_requirements), not {item!r}"
                )
        self.packages: tuple[str, ...] = tuple(packages)  # to install where the blocks run
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
        self._add_source(source, name)

    def _add_source(self, source: str, name: str | None) -> None:
        """Add the function defined in ``source`` (the first, or ``name``),
        without its decorators: they belong to the host (``@with_requirements(...)``
        over several lines too)."""
        try:
            node = next(
                n
                for n in ast.parse(source).body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and name in (None, n.name)
            )
        except (SyntaxError, StopIteration):
            raise ConfigurationError(
                f"functions=[...]: no function {name or ''} defined in {source[:200]!r}"
            ) from None
        text = "\n".join(source.splitlines()[node.lineno - 1 : node.end_lineno])
        self._sources.append(text + "\n")
        signature = _signature(text, node.name)
        doc = ast.get_docstring(node)
        if doc:
            signature += "\n" + textwrap.indent(f'"""{doc}"""', "    ")
        self._signatures.append(signature)

    def __bool__(self) -> bool:
        return bool(self._sources)

    def source(self) -> str:
        """The module's text: the global imports of the functions, then them."""
        return "\n\n".join(["\n".join(self._imports)] * bool(self._imports) + self._sources)

    def import_probe(self) -> str | None:
        """Python source that tries each global import on its own and prints
        the ones that fail (None: there is none to try). Run it with the
        blocks' Python, where the blocks run."""
        if not self._imports:
            return None
        return (
            "import json\nfailed = []\n"
            f"for line in {self._imports!r}:\n"
            "    try:\n        exec(line, {})\n"
            "    except BaseException as exc:\n"
            "        failed.append([line, f'{type(exc).__name__}: {exc}'])\n"
            f"print({_PROBE_MARK!r} + json.dumps(failed))\n"
        )

    def import_error(self, output: str, where: str) -> ConfigurationError | None:
        """The error for the probe's ``output`` (what it printed, run
        ``where``), naming each global import that failed; None if all
        were imported."""
        found = [line for line in output.splitlines() if line.startswith(_PROBE_MARK)]
        try:
            failed = json.loads(found[-1].removeprefix(_PROBE_MARK))
        except (IndexError, ValueError):
            return ConfigurationError(
                f"could not check the global imports of functions=[...] with {where}: {output.strip()[-500:]}"
            )
        if not failed:
            return None
        causes = "; ".join(
            f"{line!r} (global_imports of {', '.join(self._import_owners.get(line, ['?']))}) failed: {why}"
            for line, why in failed
        )
        return ConfigurationError(
            f"functions=[...] cannot be loaded where the blocks run ({where}): {causes}. Fix the name "
            "in @with_requirements(global_imports=[...]), or provide the package: add it to "
            "python_packages=[...] with environment=Venv() (execbox installs it), or install it there"
        )

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


class _WithRequirements(Protocol):
    func: Callable[..., object] | str
    python_packages: Any
    global_imports: Any


def _has_requirements(item: Any) -> TypeGuard[_WithRequirements]:
    """AG2's or AutoGen's FunctionWithRequirements / FunctionWithRequirementsStr."""
    return all(hasattr(item, a) for a in ("func", "python_packages", "global_imports")) and (
        isinstance(item.func, str) or inspect.isfunction(item.func)
    )


def _function_name(func: Callable[..., object] | str) -> str:
    if isinstance(func, str):
        node = next(
            (n for n in ast.walk(_parsed(func)) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)),
            None,
        )
        return node.name if node is not None else "a function given as source"
    return getattr(func, "__name__", repr(func))


def _parsed(source: str) -> ast.Module:
    try:
        return ast.parse(textwrap.dedent(source))
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def _packages(item: Any) -> list[str]:
    packages = item.python_packages
    if isinstance(packages, str) or not all(isinstance(p, str) and p.strip() for p in packages):
        raise ConfigurationError(
            f"@with_requirements(python_packages={packages!r}) of {item.func!r}: "
            "give a list of requirement strings such as ['pandas>=2']"
        )
    return [p.strip() for p in packages]


def _import_line(item: Any) -> str:
    """A global import as AG2 and AutoGen write it: "numpy", Alias("numpy", "np"),
    ImportFromModule("math", ["pi", Alias("sqrt", "root")])."""

    def name(part: Any) -> str:
        return part if isinstance(part, str) else f"{part.name} as {part.alias}"

    if isinstance(item, str):
        return f"import {item}"
    if hasattr(item, "module") and hasattr(item, "imports"):
        return f"from {item.module} import {', '.join(map(name, item.imports))}"
    if hasattr(item, "name") and hasattr(item, "alias"):
        return f"import {name(item)}"
    raise ConfigurationError(
        f"@with_requirements(global_imports=[...]) has {item!r}: use a module name, "
        "Alias(name, alias) or ImportFromModule(module, [names])"
    )
