"""``execbox judge``: a program against test cases, a verdict each
(``Executor.judge``). Exit status 0 when every case is accepted, 1 when
one is not, 2 for a bad request."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._models import Limits
from ..backends import DEFAULT_BACKEND, backend_names, create_executor
from ._limit_options import as_flags, memory_size
from ._source_language import language_of_file

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("judge", help="run a program against test cases, a verdict each")
    cmd.add_argument("file", metavar="FILE", help="the program's source")
    cmd.add_argument("--cases", required=True, metavar="CASES", help="a JSON list (or JSON lines) of cases")
    cmd.add_argument("-l", "--language", default=None, help="its language (default: from FILE's suffix)")
    cmd.add_argument("--compare", default="lines", choices=("lines", "exact", "whitespace", "float"))
    cmd.add_argument("--tolerance", type=float, default=1e-6, help="for --compare float (default: 1e-6)")
    cmd.add_argument("--all", action="store_true", help="run every case (default: stop at the first failure)")
    cmd.add_argument(
        "--shared-workspace",
        action="store_true",
        help="the cases share one workspace (default: each finds it as it was before the first)",
    )
    cmd.add_argument("--backend", default=DEFAULT_BACKEND, help=f"one of {', '.join(backend_names())}")
    cmd.add_argument(
        "--timeout", type=float, default=10.0, metavar="S", help="seconds per case (default: 10)"
    )
    cmd.add_argument(
        "--memory",
        dest="memory_mb",
        type=memory_size,
        default=None,
        metavar="SIZE",
        help="memory per case: megabytes, or with a unit: 256M, 1G (default: the backend's)",
    )
    cmd.add_argument(
        "--memory-mb", dest="memory_mb", type=memory_size, help=argparse.SUPPRESS
    )  # the old spelling
    cmd.add_argument("--json", action="store_true", help="print the result as JSON")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    source = _text(args.file)
    language = language_of_file(args.file, args.language)
    cases = _cases(_text(args.cases), args.cases)
    limits = Limits(timeout_s=args.timeout, memory_mb=args.memory_mb)
    with create_executor(args.backend, limits=limits) as executor:
        result = executor.judge(
            source,
            language,
            cases,
            compare=args.compare,
            tolerance=args.tolerance,
            stop_on_failure=not args.all,
            fresh_workspace=not args.shared_workspace,
        )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        if result.compile_output:
            sys.stdout.write(result.compile_output)
        for case in result.cases:
            memory = f"{case.peak_memory_mb:.1f} MB" if case.peak_memory_mb is not None else "-"
            label = case.name or f"case {case.index + 1}"
            message = as_flags(case.message)  # the limits named as the options that set them
            print(f"{label}: {case.verdict}  {case.time_s:.3f} s  {memory}  {message}".rstrip())
        print(f"{result.verdict}: {result.passed}/{result.total} passed")
    return 0 if result.accepted else 1


def _text(name: str) -> str:
    path = Path(name)
    if not path.is_file():
        raise ConfigurationError(f"no such file: {name}")
    return path.read_text(encoding="utf-8", errors="replace")


def _cases(text: str, name: str) -> list[Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{name} is neither JSON nor JSON lines: {exc}") from None
    if not isinstance(data, list):
        raise ConfigurationError(f"{name} must hold a list of cases {{stdin, expected_stdout | checker}}")
    return data
