"""The ``execbox`` command. One module per command group; this one parses
and turns every execbox error into one clear line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._errors import ExecboxError
from .._version import __version__
from . import _chat, _doctor, _explore, _images, _judge, _languages, _mcp, _papers, _playground, _run, _serve
from ._limit_options import as_flags
from ._parser import Parser

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="execbox",
        description="Run code written by language models and hand the results back.",
    )
    parser.add_argument("--version", action="version", version=f"execbox {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _run.register(commands)
    _languages.register(commands)
    _judge.register(commands)
    _doctor.register(commands)
    _images.register(commands)
    _chat.register(commands)
    _explore.register(commands)
    _mcp.register(commands)
    _papers.register(commands)
    _serve.register(commands)
    _playground.register(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except ExecboxError as exc:
        print(f"execbox: error: {as_flags(str(exc))}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"execbox: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("execbox: interrupted", file=sys.stderr)
        return 130
