"""Tools a model calls through function calling.

- ``PythonTool``: runs the Python a model sends in a tool call on any
  backend, with its JSON schemas for OpenAI and Anthropic.
- ``ShellTool``: runs a shell command the same way.
- ``FunctionTool``: any plain function, its schema read from its signature
  and docstring.
- ``file_tools(workspace)``: ``list_files``, ``read_file``, ``write_file``.

``execbox.tools.mcp`` (the MCP server) is imported on its own, since it needs
the ``mcp`` SDK; nothing here imports it.
"""

from ._files import file_tools
from ._function_tool import FunctionTool
from ._python import PythonTool
from ._shell import ShellTool

__all__ = ["FunctionTool", "PythonTool", "ShellTool", "file_tools"]
