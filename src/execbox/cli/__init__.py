"""The ``execbox`` command. One module per command group; this one parses
and turns every execbox error into one clear line and exit status 2."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .._errors import ExecboxError
from . import _chat, _doctor, _explore, _images, _judge, _languages, _mcp, _papers, _playground, _run, _serve

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="execbox",
        description="Run code written by language models and hand the results back.",
    )
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
        print(f"execbox: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        print(f"execbox: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("execbox: interrupted", file=sys.stderr)
        return 130
