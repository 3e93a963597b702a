"""``PythonTool.as_function()``: the tool as a plain function, for the agent
frameworks that build a tool from a function's signature and docstring:

    >>> register_function(tool.as_function(), caller=assistant, executor=runner,
    ...                   description=tool.description)                          # AG2
    >>> FunctionTool(tool.as_function(asynchronous=True), description=tool.description)  # AutoGen
    >>> StructuredTool.from_function(tool.as_function())                       # LangChain

They take functions, not callable objects (AG2 checks ``inspect.isfunction``;
AutoGen and LangChain read ``__name__`` and ``typing.get_type_hints``), so a
``PythonTool`` itself is refused with their own messages: "'func_or_tool' must
be a function or a Tool", "... is not a module, class, method, or function",
"'PythonTool' object has no attribute '__name__'". What they get here is a real
function named for the tool, ``(code: str, libraries: list[str] | None = None)
-> dict[str, Any]``, its annotations real types (not strings: the frameworks
evaluate them in the function's globals), each parameter's description in
``Annotated[..., "...", <one per function>]`` (all three read the string) and the tool's description
with Google-style ``Args:`` as its docstring (LangChain's
``parse_docstring=True`` reads those).
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Protocol, cast

__all__ = ["tool_function"]


class RunsPython(Protocol):
    """What the function needs of the tool (a ``PythonTool``)."""

    name: str

    @property
    def description(self) -> str: ...
    def parameters(self) -> dict[str, Any]: ...
    def __call__(self, code: str, libraries: Any = None) -> dict[str, Any]: ...
    async def arun(self, code: str, libraries: Any = None) -> dict[str, Any]: ...


_RETURNS = (
    "A dict: success (bool), stdout and stderr (str: what the code printed), error (str, or null when "
    "it succeeded) and files (the paths it created or changed, relative to the working directory)."
)


class _Own:
    """The last metadata of the function's ``Annotated`` types, one per
    function, so its annotations are objects of its own: typing caches
    ``Annotated[str, "..."]`` (the same object for every function annotated
    alike), and AG2's ``register_function`` rewrites the metadata of the
    annotations it is given in place (ag2 0.14,
    ``_string_metadata_to_description_field``: the string becomes an AG2
    ``Field``). Shared, every later function would then carry AG2's field,
    which AutoGen refuses ("Invalid description ... should be a string") and
    LangChain does not read."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<one per as_function()>"


def tool_function(
    tool: RunsPython, *, name: str, asynchronous: bool
) -> Callable[..., dict[str, Any]] | Callable[..., Awaitable[dict[str, Any]]]:
    """``tool`` as a function named ``name`` (a coroutine function when
    ``asynchronous``), its description and schema taken from the tool now."""
    properties = tool.parameters()["properties"]
    code_help: str = properties["code"]["description"]
    libraries_help: str = properties["libraries"]["description"]

    function: Callable[..., Any]
    if asynchronous:

        async def function(code, libraries=None):
            return await tool.arun(code, libraries)
    else:

        def function(code, libraries=None):
            return tool(code, libraries)

    own = _Own()
    code_type = Annotated[str, code_help, own]
    libraries_type = Annotated[list[str] | None, libraries_help, own]
    function.__name__ = function.__qualname__ = name
    function.__doc__ = (
        f"{tool.description}\n\nArgs:\n    code: {code_help}\n    libraries: {libraries_help}\n\n"
        f"Returns:\n    {_RETURNS}\n"
    )
    function.__annotations__ = {"code": code_type, "libraries": libraries_type, "return": dict[str, Any]}
    cast(Any, function).__signature__ = inspect.Signature(
        [
            inspect.Parameter("code", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=code_type),
            inspect.Parameter(
                "libraries", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=libraries_type
            ),
        ],
        return_annotation=dict[str, Any],
    )
    return function
