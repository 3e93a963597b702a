"""The package layers of docs/architecture.md, checked on the source: each
import points down (or across the top layer), no two units import each
other through any path, and a backend reaches into another backend only
where the table below says why.

A unit is a top-level package or module of ``execbox`` (``server``,
``_models``), or one backend (``backends.sandbox``); ``backends`` alone is
the backends' shared core. Every import counts, those inside functions too.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "execbox"

# top to bottom, as docs/architecture.md draws them
LAYERS: list[frozenset[str]] = [
    frozenset({"cli", "server", "agents", "tools", "integrations", "papers"}),  # what users call
    frozenset(
        {
            "backends",
            *(
                f"backends.{p.name}"
                for p in (PACKAGE / "backends").iterdir()
                if p.is_dir() and not p.name.startswith("_")
            ),
        }
    ),
    frozenset({"jail"}),  # the jail kit the sandbox backend, the jailed kernel and the doctor use
    frozenset({"environments", "images", "_docker_engine"}),  # where the code's Python comes from
    frozenset({"client"}),  # the HTTP client of execbox serve
    frozenset(
        {
            "_models",
            "_run_events",
            "_extract",
            "_languages",
            "_language_model",
            "_workspace",
            "_codec",
            "_errors",
            "_nofollow",
            "_foreign",
            "_version",
            "_cache",
            "_gpus",
            "_judge",
            "_progress",
            "_netlink",
        }
    ),  # the data and the rules
]
# the top layer's units use each other (an agent's tools, a paper's agent, the CLI's server)
ACROSS_THE_TOP = True

# one backend using another's parts, and why (any other is a failure)
BACKEND_EDGES = {
    ("backends.jupyter", "backends.docker"): "a Docker-hosted Jupyter server uses the container settings",
}


def _unit(module: str) -> str | None:
    parts = module.split(".")[1:]
    if not parts:
        return None  # execbox itself: the public API, above everything
    if parts[0] == "backends" and len(parts) > 1 and (PACKAGE / "backends" / parts[1]).is_dir():
        return f"backends.{parts[1]}"
    return parts[0]


def _module_of(path: Path) -> tuple[str, str]:
    """The module's dotted name and the package its relative imports start from."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
        return ".".join(parts), ".".join(parts)
    return ".".join(parts), ".".join(parts[:-1])


def _is_module(dotted: str) -> bool:
    path = SRC.joinpath(*dotted.split("."))
    return path.is_dir() or path.with_suffix(".py").exists()


def _imports() -> dict[str, set[tuple[str, str]]]:
    """unit -> {(imported unit, the importing file)}."""
    found: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in PACKAGE.rglob("*.py"):
        module, package = _module_of(path)
        source = _unit(module)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                targets = [
                    target,
                    *(f"{target}.{a.name}" for a in node.names if _is_module(f"{target}.{a.name}")),
                ]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if target.split(".")[0] != "execbox" or not _is_module(target):
                    continue
                unit = _unit(target)
                if source and unit and unit != source:
                    found[source].add((unit, str(path.relative_to(SRC))))
    return found


def _layer(unit: str) -> int:
    for index, layer in enumerate(LAYERS):
        if unit in layer:
            return index
    raise AssertionError(f"{unit} is in no layer: add it to docs/architecture.md and LAYERS here")


def test_every_unit_has_a_layer():
    units = {_unit(_module_of(p)[0]) for p in PACKAGE.rglob("*.py")} - {None}
    for unit in sorted(units):  # type: ignore[type-var]
        _layer(unit)  # type: ignore[arg-type]


def test_imports_point_down():
    upward = []
    for source, edges in _imports().items():
        for target, where in edges:
            up = _layer(target) < _layer(source)
            across = _layer(target) == _layer(source)
            if (
                up
                or (
                    across
                    and _layer(source) == 1
                    and source != "backends"
                    and target != "backends"
                    and (source, target) not in BACKEND_EDGES
                )
                or (across and _layer(source) not in (0, 1) and not ACROSS_THE_TOP)
            ):
                upward.append(f"{where}: {source} -> {target}")
    assert not upward, "imports against the layers:\n" + "\n".join(sorted(upward))


def test_no_unit_imports_itself_through_others():
    graph = {source: {target for target, _ in edges} for source, edges in _imports().items()}
    circles = []
    for start in sorted(graph):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not circles, "import circles between units:\n" + "\n".join(sorted(set(circles)))


def test_the_backend_edges_listed_are_still_used():
    used = {(s, t) for s, edges in _imports().items() for t, _ in edges}
    stale = [f"{s} -> {t}" for s, t in BACKEND_EDGES if (s, t) not in used]
    assert not stale, f"BACKEND_EDGES names edges the code no longer has: {stale}"
