"""The executor contract: every backend passes the same suite.

The backends are those of ``tests/_backends.py``'s ``CONTRACT``; a backend
joins by adding its entry there.
"""

from __future__ import annotations

import pytest

from execbox import Executor, Limits, Workspace
from tests._backends import BACKENDS, CONTRACT


@pytest.fixture(params=sorted(CONTRACT))
def make_executor(request, tmp_path):
    """Build executors of the backend under test; closes them afterwards."""
    made: list[Executor] = []

    def make(limits: Limits | None = None) -> Executor:
        executor = BACKENDS[request.param].build(Workspace(tmp_path / "ws"), limits or Limits(timeout_s=30))
        made.append(executor)
        return executor

    yield make
    for executor in made:
        executor.close()


@pytest.fixture
def executor(make_executor):
    return make_executor()
