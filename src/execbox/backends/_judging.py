"""``Executor.judge``: a program run against test cases, one verdict each
(the model and the comparison are ``execbox._judge``).

Each case is a run of the block with the case's stdin, under the
executor's limits: a compiled language is built by the first and found
built by the rest (``_build``). A checker runs as a block of the same
executor, after the case it judges.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
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
from .._models import BlockResult, CodeBlock

if TYPE_CHECKING:
    from ._base import Executor

__all__ = ["judge"]

_KEPT = 64 << 10  # characters of a case's stdout and stderr kept in its result
_REFUSED = ("UnsupportedLanguage", "RefusedLanguage", "StdinUnsupported")


def judge(
    executor: Executor,
    code: str,
    language: str,
    cases: Sequence[Case | Mapping[str, Any]],
    *,
    compare: str = "lines",
    tolerance: float = 1e-6,
    stop_on_failure: bool = True,
) -> JudgeResult:
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
        block = _run(executor, CodeBlock(language, code, stdin=case.stdin))
        name = block.language
        verdict, message = verdict_of(block)
        if verdict == "compile_error":  # every case would say the same: the build is cached
            return JudgeResult(
                verdict="compile_error",
                language=name,
                compile_output=block.output,
                total=len(todo),
                duration_s=time.monotonic() - started,
                backend=executor.name,
            )
        if verdict == "accepted":
            verdict, message = _judged(executor, case, block, compare, tolerance)
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
        backend=executor.name,
    )


def _run(executor: Executor, block: CodeBlock) -> BlockResult:
    result = executor.run(block)
    if not result.blocks:
        raise ConfigurationError(result.error.value if result.error else "the block did not run")
    ran = result.blocks[0]
    if ran.error is not None and ran.error.name in _REFUSED:  # a request this executor cannot judge
        raise ConfigurationError(ran.error.value)
    return ran


def _judged(
    executor: Executor, case: Case, block: BlockResult, compare: str, tolerance: float
) -> tuple[Verdict, str]:
    if case.checker is not None:
        asked = json.dumps({"input": case.stdin, "expected": None, "output": block.stdout})
        checked = _run(executor, CodeBlock(case.checker.language, case.checker.code, stdin=asked))
        words = checked.stdout.strip()[:2000]
        if checked.status == "ok":
            return "accepted", words
        if checked.status == "failed" and checked.exit_code == 1:
            return "wrong_answer", words or "the checker rejected the output"
        return "checker_error", f"the checker failed: {checked.output.strip()[-2000:]}"
    if case.expected_stdout is None:  # judged by the exit status alone
        return "accepted", ""
    diff = compare_output(block.stdout, case.expected_stdout, compare, tolerance)
    return ("accepted", "") if diff is None else ("wrong_answer", diff)
