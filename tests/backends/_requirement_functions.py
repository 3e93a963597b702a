"""Host functions declared as AG2 and AutoGen users declare them, for
tests/backends/test_functions_requirements.py (functions=[...] reads their source, so
they live in a file)."""

from __future__ import annotations

import autogen.coding.func_with_reqs as ag2
from autogen_core.code_executor import Alias, FunctionWithRequirements, ImportFromModule, with_requirements


@with_requirements(
    python_packages=["pydantic"],
    global_imports=["pydantic", ImportFromModule("math", ["pi", Alias("sqrt", "root")])],
)
def circle(r: float) -> str:
    """A circle of radius r, as JSON."""
    Circle = pydantic.create_model("Circle", radius=(float, ...), area=(float, ...))  # noqa: F821
    return Circle(radius=r, area=round(pi * r * r, 2)).model_dump_json()  # noqa: F821


@ag2.with_requirements(python_packages=["pydantic"], global_imports=[ag2.Alias("json", "j")])
def doubled(values: list[int]) -> str:
    """The values doubled, as JSON."""
    return j.dumps([2 * v for v in values])  # noqa: F821


autogen_str = FunctionWithRequirements.from_str(
    'def triple(x: int) -> int:\n    """Three times x."""\n    return 3 * x\n', global_imports=["json"]
)
ag2_str = ag2.FunctionWithRequirements.from_str(
    "def quadruple(x):\n    return 4 * x\n", python_packages=["pydantic"]
)


@with_requirements(python_packages=["execbox-surely-not-a-package>=1"], global_imports=[])
def needs_missing() -> int:
    return 1


@with_requirements(python_packages=["six"], global_imports=["six"])
def six_kind() -> str:
    """Which Python six sees."""
    return "py3" if six.PY3 else "py2"  # noqa: F821


@with_requirements(global_imports=["json", ImportFromModule("execbox_surely_not_a_module", ["thing"])])
def bad_import() -> int:
    return 1


@ag2.with_requirements(global_imports=["execbox_surely_not_a_module"])
def ag2_bad_import() -> int:
    return 2
