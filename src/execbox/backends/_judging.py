"""``Executor.judge`` and ``ajudge``: a program run against test cases, one
verdict each (the model and the comparison are ``execbox._judge``).

The program under judgement is the checker's adversary (the judge is the
reward of RL training: a program that can sway its verdict will), so:

- each case is a run of the block with the case's stdin, under the
  executor's limits, and, unless ``fresh_workspace=False``, in the
  workspace as it was before the first case (``_judge_reset``: what a case
  leaves is removed, what it changed put back);
- a compiled program is built before the first case (``_build``), so every
  case runs that one build, and the workspace's record includes it;
- checkers run in an executor of their own (``_judge_checkers``): its own
  workspace, jail or container, which the program's blocks never see; a
  compiled checker is built there before the program's first case runs;
- a stateful executor is refused: its blocks share one interpreter, and a
  case would run in what the one before it left.

``steps`` says what to do next (prepare, run the program, run a checker,
put the workspace back) and takes its result, so that ``judge`` (threads)
and ``ajudge`` (asyncio: cancelling the task kills what runs) share every
rule.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

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
from .._languages import find_language
from .._models import BlockResult, CodeBlock, ExecutionResult
from ._build import ensure_built
from ._judge_checkers import checker_executor
from ._judge_reset import WorkspaceReset
from ._process import Cancellation

if TYPE_CHECKING:
    from ._executor_api import ExecutorLike

__all__ = ["ajudge", "judge"]

_KEPT = 64 << 10  # characters of a case's stdout and stderr kept in its result
_REFUSED = ("UnsupportedLanguage", "RefusedLanguage", "StdinUnsupported")
Step = tuple[str, CodeBlock | None]  # ("prepare" | "program" | "checker" | "reset", its block)
Steps = Generator[Step, BlockResult | None, JudgeResult]
T = TypeVar("T")


def judge(
    executor: ExecutorLike, code: str, language: str, cases: Sequence[Any], **options: Any
) -> JudgeResult:
    judgement = Judgement(executor, code, language, cases, **options)
    try:
        todo = judgement.steps()
        step = next(todo)
        while True:
            kind, block = step
            if kind in ("program", "checker"):
                assert block is not None
                answer: BlockResult | None = _first(judgement.runner(kind).run(block))
            else:
                answer = _with_cancellation(judgement.host_step(kind))
            try:
                step = todo.send(answer)
            except StopIteration as done:
                return done.value
    finally:
        judgement.close()


async def ajudge(
    executor: ExecutorLike, code: str, language: str, cases: Sequence[Any], **options: Any
) -> JudgeResult:
    judgement = Judgement(executor, code, language, cases, **options)
    try:
        todo = judgement.steps()
        step = next(todo)
        while True:
            kind, block = step
            if kind in ("program", "checker"):
                assert block is not None
                answer: BlockResult | None = _first(await judgement.runner(kind).arun(block))
            else:
                answer = await _in_thread(judgement.host_step(kind))
            try:
                step = todo.send(answer)
            except StopIteration as done:
                return done.value
    finally:
        await asyncio.shield(asyncio.to_thread(judgement.close))


class Judgement:
    """One judgement's state: its cases and options (checked when made:
    ``ConfigurationError`` before anything runs), the checkers' executor,
    the workspace's record."""

    def __init__(
        self,
        executor: ExecutorLike,
        code: str,
        language: str,
        cases: Sequence[Case | Mapping[str, Any]],
        *,
        compare: str = "lines",
        tolerance: float = 1e-6,
        stop_on_failure: bool = True,
        fresh_workspace: bool = True,
    ) -> None:
        self.cases = as_cases(cases)
        if compare not in COMPARE_MODES:
            raise ConfigurationError(f"compare={compare!r}: use one of {', '.join(COMPARE_MODES)}")
        if not (isinstance(tolerance, (int, float)) and tolerance >= 0):
            raise ConfigurationError(f"tolerance must be a number >= 0, got {tolerance!r}")
        if not isinstance(fresh_workspace, bool):
            raise ConfigurationError(f"fresh_workspace must be True or False, got {fresh_workspace!r}")
        if executor.capabilities.stateful:
            raise ConfigurationError(
                f"judge refuses a stateful {executor.name} executor: its blocks share one interpreter, so a "
                "case would run in what the case before it left; judge on an executor made with "
                "stateful=False"
            )
        self.executor, self.code, self.language = executor, code, language
        self.compare, self.tolerance = compare, tolerance
        self.stop_on_failure, self.fresh_workspace = stop_on_failure, fresh_workspace
        self.checkers: ExecutorLike | None = None
        self.checker_failures: dict[tuple[str, str], str] = {}
        self.program_failure: BlockResult | None = None
        self.reset: WorkspaceReset | None = None

    def runner(self, kind: str) -> ExecutorLike:
        if kind == "checker":
            assert self.checkers is not None
            return self.checkers
        return self.executor

    def host_step(self, kind: str) -> Callable[[Cancellation], BlockResult | None]:
        return self.prepare if kind == "prepare" else self.put_back

    def prepare(self, cancel: Cancellation) -> BlockResult | None:
        """Before the first case: the checkers' executor started and every
        compiled checker built in it, then the program built, then the
        workspace recorded. The program's failed build, if it failed."""
        checkers = {(c.checker.language, c.checker.code) for c in self.cases if c.checker is not None}
        if checkers:
            self.checkers = checker_executor(self.executor)
            self.checkers.start()
            for language, code in sorted(checkers):
                failed = _build_first(self.checkers, language, code, cancel)
                if failed is not None:
                    self.checker_failures[(language, code)] = (
                        failed.output.strip()[-2000:] or f"exit status {failed.exit_code}"
                    )
        failed = _build_first(self.executor, self.language, self.code, cancel)
        if failed is not None and failed.status == "compile_error":
            return failed
        if self.fresh_workspace:
            self.reset = WorkspaceReset(self.executor.workspace, self.executor._blocks_write_internal)
        return None

    def put_back(self, cancel: Cancellation) -> None:
        if self.reset is not None:
            self.reset.reset()

    def close(self) -> None:
        if self.checkers is not None:
            self.checkers.close()

    def steps(self) -> Steps:
        """Yields each step, is sent its result; returns the verdicts."""
        started = time.monotonic()
        todo = self.cases
        failed = yield ("prepare", None)
        if failed is not None:  # every case would say the same: the build is the one the cases run
            return JudgeResult(
                verdict="compile_error",
                language=failed.language,
                compile_output=failed.output,
                total=len(todo),
                duration_s=time.monotonic() - started,
                backend=self.executor.name,
            )
        results: list[CaseResult] = []
        overall: Verdict = "accepted"
        name = self.language
        for index, case in enumerate(todo):
            if overall != "accepted" and self.stop_on_failure:
                results.append(CaseResult(index=index, name=case.name, verdict="skipped"))
                continue
            ran = yield ("program", CodeBlock(self.language, self.code, stdin=case.stdin))
            assert ran is not None
            block = _checked(ran)
            yield ("reset", None)  # the next case, and the caller, find the workspace as it was
            name = block.language
            verdict, message = verdict_of(block)
            if verdict == "compile_error":  # a build made meanwhile (fresh_workspace=False): the same for all
                return JudgeResult(
                    verdict="compile_error",
                    language=name,
                    compile_output=block.output,
                    total=len(todo),
                    duration_s=time.monotonic() - started,
                    backend=self.executor.name,
                )
            if verdict == "accepted" and case.checker is not None:
                verdict, message = yield from self._checker_says(case, block)
            elif verdict == "accepted" and case.expected_stdout is not None:
                diff = compare_output(block.stdout, case.expected_stdout, self.compare, self.tolerance)
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
            backend=self.executor.name,
        )

    def _checker_says(self, case: Case, block: BlockResult) -> Generator[Step, Any, tuple[Verdict, str]]:
        checker = case.checker
        assert checker is not None
        failed = self.checker_failures.get((checker.language, checker.code))
        if failed is not None:
            return "checker_error", f"the checker did not build: {failed}"
        asked = json.dumps({"input": case.stdin, "expected": None, "output": block.stdout})
        said = yield ("checker", CodeBlock(checker.language, checker.code, stdin=asked))
        return _checker_verdict(_checked(said))


def _build_first(
    executor: ExecutorLike, language: str, code: str, cancel: Cancellation
) -> BlockResult | None:
    """Build a compiled ``code`` on ``executor`` (started) before any case
    runs: the failed build's result, or None (built, or nothing to build
    here: the case's run then says why, as any block's would)."""
    executor.start()
    lang = find_language(language)
    if (
        lang is None
        or lang.build is None
        or not executor.compiles
        or executor.policies.get(lang.name) != "execute"
        or lang.name not in executor.capabilities.languages
    ):
        return None
    with executor._state_lock:  # restart() cancels it as it would a run
        executor._active.add(cancel)
    try:
        common: dict[str, Any] = {"index": 0, "language": lang.name, "language_inferred": False}
        built = ensure_built(executor, lang, code, common, cancel)
    finally:
        with executor._state_lock:
            executor._active.discard(cancel)
    return built if isinstance(built, BlockResult) else None


def _with_cancellation(work: Callable[[Cancellation], T]) -> T:
    cancel = Cancellation()
    try:
        return work(cancel)
    finally:
        cancel.close()


async def _in_thread(work: Callable[[Cancellation], T]) -> T:
    """``work`` in a thread; cancelling the task cancels what it runs and
    returns once it is done with it."""
    cancel = Cancellation()
    task = asyncio.ensure_future(asyncio.to_thread(work, cancel))
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        cancel.cancel()
        while not task.done():
            try:
                await asyncio.shield(task)
            except asyncio.CancelledError:
                continue
            except BaseException:  # noqa: BLE001 (it ended, however: stop waiting)
                break
        raise
    finally:
        if task.done():
            cancel.close()


def _first(result: ExecutionResult) -> BlockResult:
    if not result.blocks:
        raise ConfigurationError(result.error.value if result.error else "the block did not run")
    return result.blocks[0]


def _checked(block: BlockResult | None) -> BlockResult:
    assert block is not None
    if block.error is not None and block.error.name in _REFUSED:  # a request this executor cannot judge
        raise ConfigurationError(block.error.value)
    return block


def _checker_verdict(checked: BlockResult) -> tuple[Verdict, str]:
    words = checked.stdout.strip()[:2000]
    if checked.status == "ok":
        return "accepted", words
    if checked.status == "failed" and checked.exit_code == 1:
        return "wrong_answer", words or "the checker rejected the output"
    return "checker_error", f"the checker failed: {checked.output.strip()[-2000:]}"
