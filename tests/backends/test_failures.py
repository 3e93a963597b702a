"""How a failed block is explained (backends/_failures.py): the limit that
ended it named by the setting to change."""

from __future__ import annotations

from execbox import Limits
from execbox.backends._failures import explain_failure


def test_node_dying_of_sigtrap_under_a_data_limit_is_the_memory_limit():
    # Node.js 18 (Debian 12's) past RLIMIT_DATA: V8's breakpoint trap, nothing on stderr
    error, note = explain_failure(
        "javascript",
        133,
        "",
        timed_out=False,
        limits=Limits(memory_mb=256),
        address_space_mb=256,
        memory_rlimit="RLIMIT_DATA",
    )
    assert error.name == "MemoryLimit" and "held as RLIMIT_DATA" in note and "raise Limits.memory_mb" in note


def test_sigtrap_without_a_memory_rlimit_stays_a_signal():
    error, note = explain_failure("javascript", 133, "", timed_out=False, limits=Limits())
    assert error.name == "Signal" and "signal 5" in note
    other, _ = explain_failure(
        "c", 133, "", timed_out=False, limits=Limits(memory_mb=256), address_space_mb=256
    )
    assert other.name == "Signal"
