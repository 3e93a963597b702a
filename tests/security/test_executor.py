"""The premise of the battery: each mode's executor runs ordinary blocks one
after another under the battery's limits. A mode that cannot has its
attacks skipped (each would fail the same way, slowly); this test says why."""

from __future__ import annotations

import pytest

from execbox import CodeBlock
from tests.security.conftest import LIMITS


@pytest.mark.premise
def test_ordinary_blocks_run_one_after_another(make_hostile):
    # the battery's limits (a 2 s timeout was too short for a one-shot jail in a TCG guest with
    # another guest beside it); a mode that fails stops at its first failed block
    executor = make_hostile(LIMITS)
    outputs: list[str] = []
    while len(outputs) < 5 and outputs == ["42\n"] * len(outputs):
        outputs.append(executor.run(CodeBlock("python", "print(6*7)")).output)
    assert outputs == ["42\n"] * 5, outputs
