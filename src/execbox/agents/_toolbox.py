"""The tools an ``AssistantAgent`` offers: anything with a schema and a
``call`` (``PythonTool``, ``ShellTool``, ``FunctionTool``, the workspace's
``file_tools``) or a plain function, which becomes a ``FunctionTool``. Their
schemas go to the model; their configs are saved with the agent."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from typing import Any

from .._errors import ConfigurationError
from ..backends import executor_from_config
from ..backends._base import Executor
from ..tools._files import file_tools
from ..tools._function_tool import FunctionTool
from ..tools._shell import ShellTool

__all__ = ["Toolbox", "as_tool"]


def as_tool(value: Any) -> Any:
    if callable(getattr(value, "openai_schema", None)) and callable(getattr(value, "call", None)):
        return value
    if callable(value) and not isinstance(value, type):
        return FunctionTool(value)
    raise ConfigurationError(
        f"{value!r} is not a tool: give a PythonTool, ShellTool, FunctionTool or a function"
    )


class Toolbox:
    """The agent's tools by name; ``owned`` are the ones it built (from a
    saved config) and closes."""

    def __init__(self, tools: Iterable[Any], owned: Iterable[Any] = ()) -> None:
        self.tools: dict[str, Any] = {}
        for tool in (as_tool(t) for t in tools):
            if tool.name in self.tools:
                raise ConfigurationError(f"two tools are named {tool.name!r}: give one of them name=...")
            self.tools[tool.name] = tool
        self.owned = list(owned)

    def schemas(self) -> list[dict[str, Any]]:
        return [tool.openai_schema() for tool in self.tools.values()]

    def get(self, name: str) -> Any | None:
        return self.tools.get(name)

    def close(self) -> None:
        """Close the tools built from a config, and their executors."""
        for tool in self.owned:
            tool.close()
            tool.executor.close()
        self.owned.clear()

    # -- config -------------------------------------------------------------------

    def to_config(self) -> list[dict[str, Any]]:
        return [tool_config(tool) for tool in self.tools.values()]

    @classmethod
    def from_config(cls, configs: Iterable[Mapping[str, Any]]) -> Toolbox:
        tools = [tool_from_config(config) for config in configs]
        return cls(tools, [t for t in tools if isinstance(getattr(t, "executor", None), Executor)])


def tool_config(tool: Any) -> dict[str, Any]:
    kind = type(tool).__name__
    if kind == "PythonTool":
        return {
            "type": "PythonTool",
            "name": tool.name,
            "executor": tool.executor.to_config(),
            "install_libraries": tool.install_libraries,
        }
    if isinstance(tool, ShellTool):
        return tool.to_config()
    if isinstance(tool, FunctionTool):
        if getattr(tool, "workspace_path", None) is not None:
            return {"type": "file_tool", "name": tool.name, "workspace": tool.workspace_path}
        function = tool.function
        where = f"{getattr(function, '__module__', '')}:{getattr(function, '__qualname__', '')}"
        if "<" in where or where.startswith(("__main__:", ":")):
            raise ConfigurationError(
                f"the tool {tool.name!r} cannot be saved: {where} is not importable (define the function at "
                "the top level of a module)"
            )
        return {"type": "function", "name": tool.name, "description": tool.description, "function": where}
    raise ConfigurationError(f"the tool {tool.name!r} ({kind}) cannot be saved in a config")


def tool_from_config(config: Mapping[str, Any]) -> Any:
    kind = config.get("type")
    if kind == "PythonTool":
        from ..tools import PythonTool

        return PythonTool(
            executor_from_config(config["executor"]),
            name=config["name"],
            install_libraries=config.get("install_libraries", True),
        )
    if kind == "ShellTool":
        return ShellTool(
            executor_from_config(config["executor"]),
            name=config["name"],
            description=config.get("description"),
        )
    if kind == "file_tool":
        from .._workspace import Workspace

        tools = {t.name: t for t in file_tools(Workspace(config["workspace"]))}
        return tools[config["name"]]
    if kind == "function":
        module, _, qualname = str(config["function"]).partition(":")
        try:
            target: Any = importlib.import_module(module)
            for part in qualname.split("."):
                target = getattr(target, part)
        except (ImportError, AttributeError) as exc:
            raise ConfigurationError(
                f"the tool function {config['function']} cannot be imported: {exc}"
            ) from None
        return FunctionTool(target, name=config.get("name"), description=config.get("description"))
    raise ConfigurationError(
        f"a tool config has type {kind!r}: use PythonTool, ShellTool, file_tool or function"
    )
