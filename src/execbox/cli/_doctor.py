"""``execbox doctor``: what the sandbox gets on this host, and the fixes."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .._languages import LANGUAGES, PYTHON, resolve_program
from ..backends.sandbox._doctor import diagnose
from ..jail import INSIDE_PATH


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "doctor", help="which isolation and limits the sandbox gets here, and the fixes"
    )
    cmd.add_argument("--json", action="store_true", help="print JSON")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    diagnosis = diagnose()
    languages = _languages()
    if args.json:
        print(json.dumps({**diagnosis.to_json(), "languages": languages}, indent=2))
        return 0 if diagnosis.tier != "none" else 1
    who = f"{diagnosis.user} ({'root' if diagnosis.root else 'not root'})"
    print(f"execbox doctor, as {who}")
    print(f"isolation the sandbox gets: {diagnosis.tier}")
    print()
    for finding in diagnosis.findings:
        print(f"  [{'ok' if finding.ok else '!!'}] {finding.name}: {finding.seen}")
        if finding.fix:
            for line in finding.fix.splitlines():
                print(
                    f"         fix: {line}"
                    if line == finding.fix.splitlines()[0]
                    else f"              {line}"
                )
    if diagnosis.limits or diagnosis.gaps:
        print("\nlimits:")
        for name, how in diagnosis.limits.items():
            print(f"  [ok] {name}: {how}")
        for name, why in diagnosis.gaps.items():
            print(f"  [!!] {name}: {why}")
    if diagnosis.pool is not None:
        print("\nwarm pool: " + ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in diagnosis.pool.items()))
    if diagnosis.hidden:
        print("\nwhat a block cannot see: " + "; ".join(diagnosis.hidden))
        print("what it can: " + "; ".join(diagnosis.exposed))
    gpus: dict[str, Any] = diagnosis.gpus
    if gpus.get("found"):
        print(f"\nGPUs (NVIDIA driver {gpus['driver']}):")
        for line in gpus["found"]:
            print(f"  {line}")
        print(f"  nodes a block given them gets: {', '.join(gpus['nodes'])}")
        for tier, how in gpus["tiers"].items():
            print(f"  {tier}: {how}")
        print(f"  memory of GPU blocks: {gpus['memory']}")
    elif gpus:
        print(f"\nGPUs: none ({gpus['fix']})")
    print(f"\nlanguages a block runs here: {', '.join(languages['available'])}")
    for name, fix in languages["missing"].items():
        print(f"  [--] {name}: {fix}")
    if diagnosis.tier == "none":
        print("\nthe sandbox cannot start here: apply a fix above, or run unisolated with --backend local")
        return 1
    return 0


def _languages() -> dict[str, Any]:
    """The languages whose toolchain the jail finds (it binds the host's
    system folders), and for each of the rest what to install."""
    available, missing = [], {}
    for lang in LANGUAGES:
        programs = lang.programs()
        if not programs:
            continue
        absent = [p for p in programs if p != PYTHON and resolve_program(p, INSIDE_PATH) is None]
        if absent and lang.installed(lambda p: resolve_program(p, INSIDE_PATH) is not None) is None:
            missing[lang.name] = f"{', '.join(absent)} not found: {lang.install_hint}"
        else:
            available.append(lang.name)
    return {"available": available, "missing": missing}
