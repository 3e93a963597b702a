"""The premise of the battery: each mode's executor runs ordinary blocks one
after another under the battery's limits. A mode that cannot has its
attacks skipped (each would fail the same way, slowly); this test says why."""

from __future__ import annotations

import pytest

from execbox import CodeBlock
from tests.security.conftest import TIMING_OUT


@pytest.mark.premise
def test_ordinary_blocks_run_one_after_another(make_hostile):
    executor = make_hostile(TIMING_OUT)  # the battery's limits; a failing block ends sooner
    outputs = [executor.run(CodeBlock("python", "print(6*7)")).output for _ in range(5)]
    assert outputs == ["42\n"] * 5, outputs
