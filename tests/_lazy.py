"""Names of a framework that test modules import at their first use, not
when pytest collects them.

Importing AG2 (``autogen``) takes ~3 s of CPU (it imports the SDKs of
every model vendor); every pytest-xdist worker collects every test
module, so a module-level import cost each worker those seconds even
when another worker ran the tests. ``Lazy("autogen", "ConversableAgent")``
stands for the class: called, asked for an attribute or given to
``isinstance``, it imports it then.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__all__ = ["Lazy", "LazyModule", "missing"]


class Lazy:
    """``module.name``, imported when first used."""

    def __init__(self, module: str, name: str) -> None:
        self._where = (module, name)
        self._value: Any = None

    def _target(self) -> Any:
        if self._value is None:
            module, name = self._where
            self._value = getattr(importlib.import_module(module), name)
        return self._value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._target()(*args, **kwargs)

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self._target(), attribute)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._target())

    def __subclasscheck__(self, subclass: type) -> bool:
        return issubclass(subclass, self._target())

    def __repr__(self) -> str:
        return f"Lazy({self._where[0]}.{self._where[1]})"


class LazyModule:
    """A module imported when one of its attributes is first asked for."""

    def __init__(self, module: str) -> None:
        self._name = module

    def __getattr__(self, attribute: str) -> Any:
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(importlib.import_module(self._name), attribute)


def missing(*modules: str, hint: str) -> str | None:
    """Why a test needs what is not installed (the first of ``modules``
    that cannot be found, and ``hint``), or None when all are there."""
    for module in modules:
        try:
            found = importlib.util.find_spec(module) is not None
        except ImportError:  # a parent package that is missing
            found = False
        if not found:
            return f"No module named {module!r}: {hint}"
    return None
