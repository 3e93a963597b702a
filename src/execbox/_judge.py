"""The judge's model: test cases, how a program's output is compared with
the expected one, and the verdicts (``Executor.judge`` runs them).

Verdicts, as programming judges name them: ``accepted``, ``wrong_answer``
(with a diff of the first differing line), ``time_limit``,
``memory_limit``, ``runtime_error``, ``compile_error``, ``checker_error``
(the checker program itself failed) and ``skipped`` (not run: an earlier
case failed and the judge stops at the first failure).

Comparison modes: ``exact`` (byte for byte), ``lines`` (trailing spaces and
trailing empty lines ignored: what most judges do), ``whitespace`` (any run
of whitespace equals any other), ``float`` (tokens compared as numbers
within ``tolerance``, absolute or relative, the rest as in ``whitespace``;
``inf``, ``-inf`` and ``nan`` equal only the same non-finite value, never a number).
A case with neither accepts a program that exits with status 0. A case
with ``checker`` is judged by that program instead: it gets a JSON
object ``{"input", "expected", "output"}`` on stdin and exits 0 to accept,
1 to reject (its stdout is the message); any other exit is a checker error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import ConfigurationError
from ._models import BlockResult, CodeBlock

__all__ = [
    "COMPARE_MODES",
    "Case",
    "CaseResult",
    "JudgeResult",
    "Verdict",
    "as_cases",
    "compare_output",
    "verdict_of",
]

Verdict = Literal[
    "accepted",
    "wrong_answer",
    "time_limit",
    "memory_limit",
    "runtime_error",
    "compile_error",
    "checker_error",
    "skipped",
]
Compare = Literal["exact", "lines", "whitespace", "float"]
COMPARE_MODES: tuple[str, ...] = ("exact", "lines", "whitespace", "float")
_SHOWN = 200  # characters of a differing line shown in a diff


@dataclass(frozen=True)
class Case:
    """One test: the program's ``stdin`` and the ``expected_stdout`` or a
    ``checker`` program that decides (neither: a program that ends with
    exit status 0 is accepted, as HumanEval's tests judge)."""

    stdin: str = ""
    expected_stdout: str | None = None
    checker: CodeBlock | None = None
    name: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.stdin, str):
            raise ConfigurationError(f"Case.stdin must be a str, not {type(self.stdin).__name__}")
        if self.expected_stdout is not None and self.checker is not None:
            raise ConfigurationError("a judge case takes expected_stdout or checker, not both")


@dataclass(frozen=True, kw_only=True)
class CaseResult:
    """One case's verdict, with the program's time, peak memory and output."""

    index: int
    name: str = ""
    verdict: Verdict
    time_s: float = 0.0
    peak_memory_mb: float | None = None
    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    message: str = ""  # the diff, the error, the checker's words


@dataclass(frozen=True, kw_only=True)
class JudgeResult:
    """The verdict of a program over its cases: ``accepted`` when every case
    is, else the first failed case's verdict."""

    verdict: Verdict
    language: str
    cases: tuple[CaseResult, ...] = ()
    compile_output: str = ""
    passed: int = 0
    total: int = 0
    duration_s: float = 0.0
    backend: str = ""

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "language": self.language,
            "passed": self.passed,
            "total": self.total,
            "duration_s": self.duration_s,
            "backend": self.backend,
            "compile_output": self.compile_output,
            "cases": [dict(vars(case)) for case in self.cases],
        }


def as_cases(cases: Sequence[Case | Mapping[str, Any]]) -> list[Case]:
    """Cases from ``Case`` objects or dicts ``{stdin, expected_stdout | checker}``
    (a checker as ``{code, language?}``)."""
    if isinstance(cases, (str, bytes, Mapping)) or not cases:
        raise ConfigurationError("cases must be a non-empty list of {stdin, expected_stdout | checker}")
    made = []
    for index, case in enumerate(cases):
        if isinstance(case, Case):
            made.append(case)
            continue
        if not isinstance(case, Mapping):
            raise ConfigurationError(f"cases[{index}] must be a Case or a dict, not {type(case).__name__}")
        unknown = sorted(set(case) - {"stdin", "expected_stdout", "checker", "name"})
        if unknown:
            raise ConfigurationError(
                f"cases[{index}] has unknown keys {', '.join(unknown)}: "
                "use stdin, expected_stdout, checker, name"
            )
        checker = case.get("checker")
        if isinstance(checker, Mapping):
            if not isinstance(checker.get("code"), str):
                raise ConfigurationError(f"cases[{index}].checker needs 'code' (a string)")
            checker = CodeBlock(str(checker.get("language") or "python"), checker["code"])
        elif checker is not None and not isinstance(checker, CodeBlock):
            raise ConfigurationError(f"cases[{index}].checker must be {{code, language?}} or a CodeBlock")
        stdin, expected, name = case.get("stdin", ""), case.get("expected_stdout"), case.get("name", "")
        if not isinstance(stdin, str) or not (expected is None or isinstance(expected, str)):
            raise ConfigurationError(f"cases[{index}]: stdin and expected_stdout must be strings")
        try:
            made.append(Case(stdin, expected, checker, str(name)))
        except ConfigurationError as exc:
            raise ConfigurationError(f"cases[{index}]: {exc}") from None
    return made


def compare_output(actual: str, expected: str, mode: str = "lines", tolerance: float = 1e-6) -> str | None:
    """None when ``actual`` matches ``expected`` under ``mode``, else a
    one-line description of the first difference."""
    if mode == "exact":
        if actual == expected:
            return None
        return _first_difference(actual.split("\n"), expected.split("\n"))
    if mode == "lines":
        got, want = _lines(actual), _lines(expected)
        return None if got == want else _first_difference(got, want)
    if mode in ("whitespace", "float"):
        got_tokens, want_tokens = actual.split(), expected.split()
        for position, (token, wanted) in enumerate(zip(got_tokens, want_tokens, strict=False)):
            if token != wanted and not (mode == "float" and _close(token, wanted, tolerance)):
                return f"token {position + 1}: expected {_shown(wanted)}, got {_shown(token)}"
        if len(got_tokens) != len(want_tokens):
            return f"expected {len(want_tokens)} tokens, got {len(got_tokens)}"
        return None
    raise ConfigurationError(f"compare={mode!r}: use one of {', '.join(COMPARE_MODES)}")


def verdict_of(block: BlockResult) -> tuple[Verdict, str]:
    """What a case's run says before its output is compared: ``accepted``
    for a program that ended well (its output is compared next)."""
    error = block.error
    if block.status == "compile_error":
        return "compile_error", error.value if error else "the compiler failed"
    if block.status == "timeout" or (error is not None and error.name == "Timeout"):
        return "time_limit", error.value if error else "timed out"
    if error is not None and error.name in ("MemoryLimit", "GpuMemoryLimit"):
        return "memory_limit", error.value
    if block.status != "ok":
        return "runtime_error", f"{error.name}: {error.value}" if error else f"exit code {block.exit_code}"
    return "accepted", ""


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _first_difference(got: list[str], want: list[str]) -> str:
    for number, (a, b) in enumerate(zip(got, want, strict=False), start=1):
        if a != b:
            return f"line {number}: expected {_shown(b)}, got {_shown(a)}"
    if len(got) < len(want):
        return f"line {len(got) + 1}: expected {_shown(want[len(got)])}, got the end of the output"
    return f"line {len(want) + 1}: expected the end of the output, got {_shown(got[len(want)])}"


def _close(got: str, want: str, tolerance: float) -> bool:
    try:
        a, b = float(got), float(want)
    except ValueError:
        return False
    if not (math.isfinite(a) and math.isfinite(b)):  # inf is no answer to 42: only to inf (nan to nan)
        return (math.isnan(a) and math.isnan(b)) or a == b
    return abs(a - b) <= tolerance or abs(a - b) <= tolerance * max(abs(a), abs(b))


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")
