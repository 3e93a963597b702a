"""``execbox languages``: what runs, what is saved, what is refused."""

from __future__ import annotations

import argparse
import json

from .._languages import LANGUAGES, PYTHON, resolve_program


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("languages", help="list languages, aliases and policies")
    cmd.add_argument("--json", action="store_true", help="print JSON")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    rows = []
    for lang in LANGUAGES:
        if lang.command is None:
            runner = "-"
        elif lang.command[0] == PYTHON:
            runner = "the environment's python"
        else:
            runner = resolve_program(lang.command[0]) or f"not installed ({lang.install_hint})"
        rows.append(
            {
                "language": lang.name,
                "aliases": list(lang.aliases),
                "policy": lang.policy,
                "suffix": lang.suffix,
                "runner": runner,
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
