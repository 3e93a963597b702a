"""The command line's argument parser: an unknown option is an error that
says so and suggests the closest known one (argparse alone takes it for
the next positional, or reports the whole command's ``unrecognized
arguments`` with the top-level usage), and no option is abbreviated (a
prefix such as ``--mem`` would match hidden spellings too)."""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

__all__ = ["Parser"]

_NUMBER = re.compile(r"-\d|-\.\d")


class Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        self._given: list[str] = []

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._given = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        unknown = self._unknown_option(extras)
        if unknown is not None:
            self.error(unknown)
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        # an unknown option explains the error argparse saw after it (its value taken for FILE...)
        super().error(self._unknown_option(self._given) or message)

    def _unknown_option(self, tokens: Sequence[str]) -> str | None:
        """The message for the first option in ``tokens`` this command does not know, if any."""
        for token in tokens:
            if token == "--":
                return None
            if not token.startswith("-") or token == "-" or _NUMBER.match(token):
                if self._subparsers is not None and not token.startswith("-"):
                    return None  # the command: its options are its parser's
                continue
            name = token.split("=", 1)[0] if token.startswith("--") else token[:2]
            if name in self._option_string_actions:
                continue
            known = [
                option
                for action in self._actions
                if action.help != argparse.SUPPRESS
                for option in action.option_strings
            ]
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f": did you mean {close[0]}?" if close else f" (see {self.prog} --help)"
            return f"unknown option {name}{hint}"
        return None
