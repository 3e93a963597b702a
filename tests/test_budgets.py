"""The time report every run ends with (tests/_budgets.py): the slowest
tests summed over their phases, the files over their budgets."""

from __future__ import annotations

from types import SimpleNamespace

import _budgets


def _report(nodeid: str, duration: float, when: str = "call") -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, duration=duration, when=when)


def test_the_slowest_tests_sum_their_phases():
    reports = [
        _report("tests/a.py::t1", 1.0, "setup"),
        _report("tests/a.py::t1", 2.0),
        _report("tests/b.py::t2", 2.5),
        _report("tests/b.py::t3", 0.1),
    ]
    assert _budgets.slowest(reports, 2) == [(3.0, "tests/a.py::t1"), (2.5, "tests/b.py::t2")]


def test_a_file_over_its_budget_is_named_and_one_within_is_not():
    within = _budgets.BUDGET_S["test_dev_run.py"] - 1
    reports = [
        _report("tests/slow.py::t", _budgets.DEFAULT_BUDGET_S / 2 + 1),
        _report("tests/slow.py::u", _budgets.DEFAULT_BUDGET_S / 2 + 1),
        _report("tests/test_dev_run.py::t", within),
        _report("tests/quick.py::t", 0.5),
    ]
    over = _budgets.over_budget(reports)
    assert [name for name, _, _ in over] == ["slow.py"], over
    assert over[0][2] == _budgets.DEFAULT_BUDGET_S
