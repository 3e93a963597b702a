"""The judge's comparison modes, verdicts and case parsing (``execbox._judge``),
and ``Executor.judge`` on the local backend with real programs."""

from __future__ import annotations

import pytest

from execbox import Case, ConfigurationError, Limits, LocalExecutor
from execbox._judge import as_cases, compare_output


@pytest.mark.parametrize(
    ("mode", "actual", "expected", "same"),
    [
        ("exact", "3\n", "3\n", True),
        ("exact", "3\n", "3", False),
        ("lines", "3  \n\n\n", "3", True),
        ("lines", "3\n4", "3\n5", False),
        ("whitespace", "1   2\n3", "1 2 3", True),
        ("whitespace", "1 2", "1 2 3", False),
        ("float", "0.30000000000000004", "0.3", True),
        ("float", "0.31", "0.3", False),
        ("float", "nan x", "nan x", True),
        # a non-finite value equals only the same one: inf is no answer to 42 (issue 39)
        ("float", "inf", "42", False),
        ("float", "-inf", "-1e308", False),
        ("float", "1e999", "1e308", False),
        ("float", "nan", "0", False),
        ("float", "inf", "inf", True),
        ("float", "-inf", "inf", False),
    ],
)
def test_compare_modes(mode, actual, expected, same):
    assert (compare_output(actual, expected, mode) is None) is same


def test_a_difference_is_named_by_its_line():
    assert compare_output("1\n2\n", "1\n3\n") == "line 2: expected '3', got '2'"
    assert compare_output("1\n", "1\n2\n") == "line 2: expected '2', got the end of the output"


def test_bad_cases_are_named():
    with pytest.raises(ConfigurationError, match="non-empty"):
        as_cases([])
    with pytest.raises(ConfigurationError, match="unknown keys expected"):
        as_cases([{"expected": "3"}])
    with pytest.raises(ConfigurationError, match="not both"):
        Case("", "3", as_cases([{"checker": {"code": "pass"}}])[0].checker)
    with pytest.raises(ConfigurationError, match="compare"):
        compare_output("a", "a", "fuzzy")


def test_judge_on_the_local_backend():
    with LocalExecutor(limits=Limits(timeout_s=5)) as ex:
        code = "a, b = map(int, input().split())\nprint(a + b)"
        result = ex.judge(
            code,
            "python",
            [{"stdin": "1 2", "expected_stdout": "3"}, {"stdin": "1 1", "expected_stdout": "3"}],
        )
        assert result.verdict == "wrong_answer" and result.passed == 1
        assert [c.verdict for c in result.cases] == ["accepted", "wrong_answer"]
        crash = ex.judge("raise SystemExit(3)", "python", [{}])
        assert crash.verdict == "runtime_error" and crash.cases[0].exit_code == 3
        with pytest.raises(ConfigurationError, match="cobol"):
            ex.judge("x", "cobol", [{}])


def test_a_cancelled_ajudge_stops_its_case_and_the_executor_goes_on(tmp_path):
    import asyncio

    async def main() -> str:
        async with LocalExecutor(workspace=tmp_path, limits=Limits(timeout_s=60)) as ex:
            task = asyncio.create_task(
                ex.ajudge(
                    "import time, pathlib; pathlib.Path('began').touch(); time.sleep(60)", "python", [{}, {}]
                )
            )
            while not (tmp_path / "began").exists():
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return (await ex.ajudge("print(1)", "python", [{"expected_stdout": "1"}])).verdict

    assert asyncio.run(asyncio.wait_for(main(), 30)) == "accepted"
