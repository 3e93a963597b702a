"""The judge on each language's own small problem (a + b from stdin), on
the sandbox with the real toolchains: accepted and wrong answer per case,
compile error for each compiled language, time limit and memory limit for
a few representative ones (tests/backends/test_languages.py runs the same
programs as plain blocks)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execbox import Limits, SandboxExecutor
from execbox._languages import LANGUAGES
from tests.backends.test_languages import (
    COMPILE_ERROR,
    HOG,
    LOOP,
    MEMORY_MB,
    REPRESENTATIVE,
    SUM,
    _need_backend,
    _need_cgroups,
    need_language,
)

# pytest mode: a block is a test file, passed or failed by its own tests, never given stdin to answer
RUNNABLE = [lang.name for lang in LANGUAGES if lang.runnable and lang.name != "pytest"]
COMPILED = [lang.name for lang in LANGUAGES if lang.build is not None]
CASES = [
    {"stdin": "1 2\n", "expected_stdout": "3", "name": "small"},
    {"stdin": "20 22", "expected_stdout": "42\n"},
    {"stdin": "2 2\n", "expected_stdout": "5", "name": "the expectation is wrong"},
    {"stdin": "7 8\n", "expected_stdout": "15"},
]


@pytest.fixture(scope="module")
def executor(tmp_path_factory) -> Iterator[SandboxExecutor]:
    _need_backend("sandbox")
    limits = Limits(timeout_s=2, memory_mb=MEMORY_MB, compile_timeout_s=120)
    with SandboxExecutor(workspace=tmp_path_factory.mktemp("judge"), limits=limits) as made:
        yield made


@pytest.mark.parametrize("language", RUNNABLE)
def test_accepted_and_wrong_answer_per_case(executor, language):
    need_language(language, executor)
    result = executor.judge(SUM[language], language, CASES, stop_on_failure=False)
    verdicts = [case.verdict for case in result.cases]
    assert verdicts == ["accepted", "accepted", "wrong_answer", "accepted"], [c.message for c in result.cases]
    assert result.verdict == "wrong_answer" and (result.passed, result.total) == (3, 4)
    assert result.cases[2].message == "line 1: expected '5', got '4'"
    first = executor.judge(SUM[language], language, CASES)  # stops at the first failure
    assert [case.verdict for case in first.cases] == ["accepted", "accepted", "wrong_answer", "skipped"]


@pytest.mark.parametrize("language", COMPILED)
def test_compile_error(executor, language):
    need_language(language, executor)
    result = executor.judge(COMPILE_ERROR[language], language, CASES)
    assert result.verdict == "compile_error" and result.cases == () and result.compile_output


@pytest.mark.parametrize("language", REPRESENTATIVE)
def test_time_limit_and_memory_limit(executor, language):
    need_language(language, executor)
    slow = executor.judge(LOOP[language], language, CASES[:2])
    assert [case.verdict for case in slow.cases] == ["time_limit", "skipped"]
    _need_cgroups()
    hog = executor.judge(HOG[language], language, CASES[:1])
    assert hog.verdict == "memory_limit", hog.cases[0]
    assert hog.cases[0].peak_memory_mb is not None and hog.cases[0].peak_memory_mb >= MEMORY_MB * 0.9
