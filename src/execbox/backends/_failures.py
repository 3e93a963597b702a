"""Explaining a failed block: from an exit status and stderr to ErrorInfo and
a note a model can act on. No I/O; shared by every backend."""

from __future__ import annotations

import re

from .._models import ErrorInfo, Limits

__all__ = ["explain_failure", "python_error", "timeout_note"]

_EXC_LINE = re.compile(
    r"^(?P<name>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Iteration|Fault)|KeyboardInterrupt|SystemExit)(?::\s?(?P<value>.*))?$"
)
_ANY_EXC_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)(?::\s?(?P<value>.*))?$")
_HEADER = "Traceback (most recent call last):"
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def python_error(stderr: str) -> ErrorInfo | None:
    """The last Python exception reported in ``stderr``, if any."""
    lines = _ANSI.sub("", stderr).rstrip("\n").split("\n")
    header = max((i for i, ln in enumerate(lines) if ln.startswith(_HEADER)), default=None)
    if header is not None:  # any exception class, user-defined ones too
        for pos in range(len(lines) - 1, header, -1):
            found = _ANY_EXC_LINE.match(lines[pos])
            if found:
                return _info(found, lines[header : pos + 1])
    for pos in range(len(lines) - 1, -1, -1):  # no header: SyntaxError and friends
        found = _EXC_LINE.match(lines[pos])
        if found:
            start = pos
            while start > 0 and lines[start - 1].startswith(('  File "', "    ")):
                start -= 1
            return _info(found, lines[start : pos + 1])
    return None


def _info(found: re.Match[str], lines: list[str]) -> ErrorInfo:
    return ErrorInfo(found["name"], (found["value"] or "").strip(), "\n".join(lines))


def timeout_note(limits: Limits) -> str:
    """Starts with "Timeout": AG2's agents and prompts look for that word."""
    return (
        f"Timeout after {limits.timeout_s:g} s (Limits.timeout_s={limits.timeout_s:g}): the block "
        "and every process it started were killed; the output printed before that is above."
    )


# What a program prints when an allocation fails (Python, C, C++, Node, Rust, Go, a JVM), or a
# reservation at its start (Node.js: "Failed to reserve virtual memory for CodeRange", a JVM:
# "Could not reserve enough space", Go: "failed to reserve page summary memory").
_ALLOCATION_FAILED = re.compile(
    r"MemoryError|Cannot allocate memory|std::bad_alloc|out of memory|"
    r"memory allocation of \d+ bytes failed|JavaScript heap out of memory|"
    r"Array buffer allocation failed|OutOfMemoryError|Native memory allocation|"
    r"failed to reserve|Could not reserve enough space",
    re.IGNORECASE,
)


V8_LANGUAGES = frozenset({"javascript", "typescript"})


def _allocation_failed(stderr: str) -> bool:
    """Whether ``stderr`` says an allocation failed: at its end, or at its head (Go's
    "fatal error: runtime: out of memory" comes before every goroutine's stack)."""
    return bool(_ALLOCATION_FAILED.search(stderr[-4096:]) or _ALLOCATION_FAILED.search(stderr[:4096]))


def explain_failure(
    language: str,
    exit_code: int,
    stderr: str,
    *,
    timed_out: bool,
    limits: Limits,
    memory_exceeded_mb: int | None = None,
    address_space_mb: int | None = None,
    gpu_memory_exceeded_mb: int | None = None,
    memory_rlimit: str = "RLIMIT_AS",
) -> tuple[ErrorInfo, str]:
    """(error, note for the output) for a block that did not succeed.
    ``memory_exceeded_mb``: the limit the kernel enforced, when it did;
    ``address_space_mb``: the rlimit standing in for a memory limit, if
    one did (an allocation over it fails instead; ``memory_rlimit`` says
    which: RLIMIT_AS, or RLIMIT_DATA for a runtime that reserves address
    space); ``gpu_memory_exceeded_mb``:
    the GPU memory limit execbox killed the block at."""
    if gpu_memory_exceeded_mb is not None:
        note = (
            f"GPU memory limit {gpu_memory_exceeded_mb} MB exceeded (Limits.gpu_memory_mb): execbox "
            "killed the block; use less GPU memory or raise Limits.gpu_memory_mb"
        )
        return ErrorInfo("GpuMemoryLimit", note), note + "."
    if memory_exceeded_mb is not None:
        note = (
            f"memory limit {memory_exceeded_mb} MB exceeded (Limits.memory_mb): the kernel killed "
            "the block; use less memory or raise Limits.memory_mb"
        )
        return ErrorInfo("MemoryLimit", note), note + "."
    if timed_out:
        note = timeout_note(limits)
        return ErrorInfo("Timeout", note), note
    found = python_error(stderr) if language == "python" else None
    # V8 ends an allocation it cannot make with a breakpoint trap: Node.js 18 (Debian 12's) says
    # nothing first, it dies of SIGTRAP
    v8_trap = language in V8_LANGUAGES and exit_code == 128 + 5
    if address_space_mb is not None and (
        found.name == "MemoryError" if found is not None else (v8_trap or _allocation_failed(stderr))
    ):
        held = "the address-space limit RLIMIT_AS" if memory_rlimit == "RLIMIT_AS" else memory_rlimit
        note = (
            f"memory limit {address_space_mb} MB reached (Limits.memory_mb, held as {held}: no memory "
            "cgroup here): an allocation failed; use less memory or raise Limits.memory_mb"
        )
        return ErrorInfo("MemoryLimit", note, found.traceback if found is not None else ""), note + "."
    if found is not None:
        return found, ""
    if exit_code > 128:
        signum = exit_code - 128
        note = f"The process was killed by signal {signum}"
        if signum == 9 and limits.memory_mb:
            note += f"; it may have exceeded the memory limit of {limits.memory_mb} MB (Limits.memory_mb)"
        return ErrorInfo("Signal", note), note + "."
    return ErrorInfo("ExitStatus", f"exit code {exit_code}"), ""
