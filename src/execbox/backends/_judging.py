"""``Executor.judge`` and ``ajudge``: a program run against test cases, one
verdict each (the model and the comparison are ``execbox._judge``).

Each case is a run of the block with the case's stdin, under the
executor's limits: a compiled language is built by the first and found
built by the rest (``_build``). A checker runs as a block of the same
executor, after the case it judges. ``steps`` says which block runs next
and takes its result, so that ``judge`` (threads) and ``ajudge`` (asyncio:
cancelling the task kills the case that runs) share every rule.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import ConfigurationError
from .._judge import (
    COMPARE_MODES,
    Case,
    CaseResult,
    JudgeResult,
    Verdict,
    as_cases,
    compare_output,
    verdict_of,
)
from .._models import BlockResult, CodeBlock, ExecutionResult

if TYPE_CHECKING:
    from ._base import Executor

__all__ = ["ajudge", "judge"]

_KEPT = 64 << 10  # characters of a case's stdout and stderr kept in its result
_REFUSED = ("UnsupportedLanguage", "RefusedLanguage", "StdinUnsupported")
Steps = Generator[CodeBlock, BlockResult, JudgeResult]


def judge(executor: Executor, code: str, language: str, cases: Sequence[Any], **options: Any) -> JudgeResult:
    todo = steps(executor.name, code, language, cases, **options)
    block = next(todo)
    while True:
        try:
            block = todo.send(_first(executor.run(block)))
        except StopIteration as done:
            return done.value


async def ajudge(
    executor: Executor, code: str, language: str, cases: Sequence[Any], **options: Any
) -> JudgeResult:
    todo = steps(executor.name, code, language, cases, **options)
    block = next(todo)
    while True:
        try:
            block = todo.send(_first(await executor.arun(block)))
        except StopIteration as done:
            return done.value


def steps(
    backend: str,
    code: str,
    language: str,
    cases: Sequence[Case | Mapping[str, Any]],
    *,
    compare: str = "lines",
    tolerance: float = 1e-6,
    stop_on_failure: bool = True,
) -> Steps:
    """Yields each block to run, is sent its result; returns the verdicts.
    Bad options raise ``ConfigurationError`` before the first block."""
    todo = as_cases(cases)
    if compare not in COMPARE_MODES:
        raise ConfigurationError(f"compare={compare!r}: use one of {', '.join(COMPARE_MODES)}")
    if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
        raise ConfigurationError(f"tolerance must be a number >= 0, got {tolerance!r}")
    started = time.monotonic()
    results: list[CaseResult] = []
    overall: Verdict = "accepted"
    name = language
    for index, case in enumerate(todo):
        if overall != "accepted" and stop_on_failure:
            results.append(CaseResult(index=index, name=case.name, verdict="skipped"))
            continue
        block = _checked((yield CodeBlock(language, code, stdin=case.stdin)))
        name = block.language
        verdict, message = verdict_of(block)
        if verdict == "compile_error":  # every case would say the same: the build is cached
            return JudgeResult(
                verdict="compile_error",
                language=name,
                compile_output=block.output,
                total=len(todo),
                duration_s=time.monotonic() - started,
                backend=backend,
            )
        if verdict == "accepted" and case.checker is not None:
            asked = json.dumps({"input": case.stdin, "expected": None, "output": block.stdout})
            checker = CodeBlock(case.checker.language, case.checker.code, stdin=asked)
            verdict, message = _checker_says(_checked((yield checker)))
        elif verdict == "accepted" and case.expected_stdout is not None:
            diff = compare_output(block.stdout, case.expected_stdout, compare, tolerance)
            verdict, message = ("accepted", "") if diff is None else ("wrong_answer", diff)
        results.append(
            CaseResult(
                index=index,
                name=case.name,
                verdict=verdict,
                time_s=round(block.duration_s, 6),
                peak_memory_mb=block.peak_memory_mb,
                exit_code=block.exit_code,
                stdout=block.stdout[:_KEPT],
                stderr=block.stderr[:_KEPT],
                message=message,
            )
        )
        if verdict != "accepted" and overall == "accepted":
            overall = verdict
    return JudgeResult(
        verdict=overall,
        language=name,
        cases=tuple(results),
        passed=sum(r.verdict == "accepted" for r in results),
        total=len(todo),
        duration_s=time.monotonic() - started,
        backend=backend,
    )


def _first(result: ExecutionResult) -> BlockResult:
    if not result.blocks:
        raise ConfigurationError(result.error.value if result.error else "the block did not run")
    return result.blocks[0]


def _checked(block: BlockResult) -> BlockResult:
    if block.error is not None and block.error.name in _REFUSED:  # a request this executor cannot judge
        raise ConfigurationError(block.error.value)
    return block


def _checker_says(checked: BlockResult) -> tuple[Verdict, str]:
    words = checked.stdout.strip()[:2000]
    if checked.status == "ok":
        return "accepted", words
    if checked.status == "failed" and checked.exit_code == 1:
        return "wrong_answer", words or "the checker rejected the output"
    return "checker_error", f"the checker failed: {checked.output.strip()[-2000:]}"
