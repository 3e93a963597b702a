"""``execbox languages``: what runs, what is saved, what is refused."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._languages import LANGUAGES, PYTHON, resolve_program


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("languages", help="list languages, aliases and policies")
    cmd.add_argument("--json", action="store_true", help="print JSON")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    for lang in LANGUAGES:
        # the build installed here (TypeScript: esbuild, else tsc), else the first one's programs
        installed = lang.installed(lambda p: p == PYTHON or resolve_program(p) is not None)
        programs = (installed or lang).programs()
        missing = [p for p in programs if p != PYTHON and resolve_program(p) is None]
        if not programs:
            runner = "-"
        elif programs[0] == PYTHON:
            runner = "the environment's python"
        elif missing:
            runner = f"not installed: {', '.join(missing)} ({lang.install_hint})"
        else:
            built = "compiled by " if lang.build is not None else ""
            runner = built + ", ".join(str(resolve_program(p)) for p in programs)
        rows.append(
            {
                "language": lang.name,
                "aliases": list(lang.aliases),
                "policy": lang.policy,
                "suffix": lang.suffix,
                "runner": runner,
                "compiled": lang.build is not None,
                "package": lang.package,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["language"]) for r in rows)
    for row in rows:
        aliases = ", ".join(row["aliases"]) or "-"
        print(f"{row['language']:<{width}}  {row['policy']:<7}  {row['runner']}  (aliases: {aliases})")
    return 0
