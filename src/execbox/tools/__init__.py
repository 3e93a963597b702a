"""Tools a model calls through function calling.

- ``PythonTool``: runs the Python a model sends in a tool call on any
  backend, with its JSON schemas for OpenAI and Anthropic.

``execbox.tools.mcp`` (the MCP server) is imported on its own, since it needs
the ``mcp`` SDK; nothing here imports it.
"""

from ._python import PythonTool

__all__ = ["PythonTool"]
