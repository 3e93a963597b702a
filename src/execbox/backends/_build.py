"""Compiled languages: a block's build, once per (language, toolchain
version, flags, source), then its program run like any block.

The build folder is ``.execbox/build/<key>/``: the key is a SHA-256 of the
language, the toolchain's version (``Language.version``, asked once per
executor's PATH), the compile command and environment, the files written
beside the source and the source itself. The host writes the source there;
the compiler runs as a block does (in the sandbox: a jail of its own under
the blocks' limits but ``Limits.compile_timeout_s``, with that folder and
the language's cache folder writable inside the otherwise sealed
``.execbox/``); the host marks the folder built once the compiler succeeds.
A marked folder is not compiled again: the same solution run against many
inputs compiles once. The folder belongs to the executor's workspace, so
builds, and Go's build cache (``.execbox/build/cache-go``), are never shared
with another executor's blocks; the service empties them between requests.

A compiler that fails (or runs out of time or memory) gives the block
``status="compile_error"`` with the compiler's output.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._errors import WorkspaceError
from .._languages import PYTHON, Language, resolve_program
from .._models import BlockResult, ErrorInfo, Limits, one_line
from .._workspace import INTERNAL_DIR
from ._blocks import failed_block
from ._process import Cancellation, OutputCallback, ProcessOutcome, run_process
from ._result import Outcome

if TYPE_CHECKING:
    from ._base import Executor

__all__ = ["BUILD_DIR", "BuildPlan", "build_and_run", "compile_failure", "plan_build", "toolchain_version"]

BUILD_DIR = f"{INTERNAL_DIR}/build"
BUILT = ".built"  # the host's mark: the compiler succeeded in this folder
_VERSION_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class BuildPlan:
    """One block's build: folders relative to the workspace, argvs absolute."""

    key: str
    folder: str  # .execbox/build/<key>
    source: str  # the source file, in ``folder``
    files: tuple[tuple[str, str], ...]  # (workspace-relative path, text) written beside it
    writable: tuple[str, ...]  # folders the compiler may write: ``folder``, the language's cache
    compile: list[str]
    run: list[str]
    env: dict[str, str]

    @property
    def marker(self) -> str:
        return f"{self.folder}/{BUILT}"


def plan_build(language: Language, code: str, root: str, version: str) -> BuildPlan:
    """Where and how ``code`` is built in the workspace at ``root``."""
    build = language.build
    assert build is not None
    main = build.main_of(code) if build.main_of is not None else build.main
    cache = f"{BUILD_DIR}/cache-{language.name}"
    digest = hashlib.sha256()
    for part in (language.name, version, *build.compile, *(f"{k}={v}" for k, v in build.env)):
        digest.update(part.encode() + b"\0")
    for name, text in build.files:
        digest.update(f"{name}\0{text}\0".encode())
    digest.update(code.encode("utf-8", "surrogatepass"))
    key = digest.hexdigest()[:32]
    folder = f"{BUILD_DIR}/{key}"
    source = f"{folder}/{main}{language.suffix}"
    values = {
        "src": os.path.join(root, source),
        "dir": os.path.join(root, folder),
        "main": main,
        "cache": os.path.join(root, cache),
    }
    return BuildPlan(
        key=key,
        folder=folder,
        source=source,
        files=tuple((f"{folder}/{name}", text) for name, text in build.files),
        writable=(folder, *((cache,) if build.cache else ())),
        compile=[arg.format(**values) for arg in build.compile],
        run=[arg.format(**values) for arg in build.run],
        env={k: v.format(**values) for k, v in build.env},
    )


def build_and_run(
    executor: Executor,
    lang: Language,
    code: str,
    common: dict[str, Any],
    cancel: Cancellation,
    on_output: OutputCallback | None,
    stdin: str | None,
) -> BlockResult:
    """A compiled block: built once (the module docstring), then its
    program run; through the executor's hooks (``_compile``,
    ``_run_program``, ``_give_build``, ``_toolchain_version``, ``_build_root``)."""
    root = executor._build_root()
    plan = plan_build(lang, code, root, executor._toolchain_version(lang))
    workspace = executor.workspace
    with _build_lock(executor, plan.key):
        if not workspace.has_internal(plan.marker):
            try:
                for folder in plan.writable:
                    os.close(workspace.internal_folder(folder))
                for name, text in ((plan.source, code), *plan.files):
                    workspace.write_internal(name, text.encode("utf-8", "surrogatepass"))
            except WorkspaceError as exc:  # a link or FIFO left in the way and not removable, a full disk
                return failed_block(
                    common, lang.name, "CannotSave", f"cannot save the block to build it: {exc}"
                )
            executor._give_build(plan.writable)
            built = executor._compile(plan.compile, folders=plan.writable, env=plan.env, cancel=cancel)
            if built.cancelled and not built.timed_out:
                return Outcome(
                    status="cancelled",
                    exit_code=130,
                    output="Cancelled while it compiled.\n",
                    stdout="",
                    stderr="",
                    duration_s=built.duration_s,
                    error=ErrorInfo("Cancelled", "cancelled while it compiled"),
                ).to_block(common)
            if built.exit_code != 0:  # its messages name the source as main.c, not by the host's path
                where = (f"{os.path.join(root, plan.folder)}/", f"{plan.folder}/")
                return compile_failure(common, lang.name, built, executor.limits, strip=where)
            workspace.write_internal(plan.marker, b"")
    return executor._run_program(lang, plan.run, cancel, on_output, stdin).to_block(common)


_locks_guard = threading.Lock()


def _build_lock(executor: Executor, key: str) -> threading.Lock:
    """One lock per build of an executor: two runs of one source compile it once."""
    with _locks_guard:
        locks: dict[str, threading.Lock] = executor.__dict__.setdefault("_build_locks", {})
        if len(locks) > 1024:  # forget idle ones: a lock only matters while held
            for name in [n for n, lock in locks.items() if not lock.locked()]:
                del locks[name]
        return locks.setdefault(key, threading.Lock())


_versions: dict[tuple[str, ...], str] = {}
_versions_lock = threading.Lock()


def toolchain_version(language: Language, path: str, python: str) -> str:
    """What ``language.version`` prints here (its first line), asked once
    per program and PATH; "" where it cannot say. The toolchain is the
    host's own (the sandbox binds it read-only), not a block's."""
    argv = list(language.version)
    if not argv:
        return ""
    program = python if argv[0] == PYTHON else resolve_program(argv[0], path)
    if program is None:
        return ""
    key = (program, *argv[1:])
    with _versions_lock:
        if key in _versions:
            return _versions[key]
    try:
        outcome = run_process(
            [program, *argv[1:]],
            cwd="/",
            env={"PATH": path, "LANG": "C.UTF-8"},
            timeout_s=_VERSION_TIMEOUT_S,
            output_limit=4096,
        )
        text = outcome.capture.combined.text().strip()
        version = text.splitlines()[0] if outcome.exit_code == 0 and text else ""
    except OSError:
        version = ""
    with _versions_lock:
        _versions[key] = version
    return version


def compile_failure(
    common: Mapping[str, Any],
    language: str,
    outcome: ProcessOutcome,
    limits: Limits,
    strip: tuple[str, ...] = (),
) -> BlockResult:
    """A failed compile as the block's result (``status="compile_error"``;
    ``strip``: prefixes taken out of the compiler's words, the build folder's)."""
    cap = outcome.capture
    texts = [cap.combined.text(), cap.stdout.text(), cap.stderr.text()]
    for prefix in strip:
        texts = [text.replace(prefix, "") for text in texts]
    output, stdout, stderr = texts
    if outcome.timed_out:
        error = ErrorInfo(
            "CompileTimeout",
            f"the {language} compiler ran past Limits.compile_timeout_s={limits.compile_timeout_s:g}: "
            "raise it, or simplify the program",
        )
    elif outcome.memory_exceeded_mb:
        error = ErrorInfo(
            "CompileMemoryLimit",
            f"the {language} compiler ran out of memory (Limits.memory_mb={outcome.memory_exceeded_mb})",
        )
    else:
        # the compiler's first error, not its headings (Go's "# command-line-arguments")
        lines = [line for line in (stderr or output).splitlines() if line.strip() and line[0] != "#"]
        first = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "")
        error = ErrorInfo("CompileError", one_line(first)[:500] or f"exit status {outcome.exit_code}")
    note = f"[execbox: {error.value}]\n" if error.name != "CompileError" else ""
    if output and not output.endswith("\n") and note:
        output += "\n"
    return BlockResult(
        **common,
        status="compile_error",
        exit_code=outcome.exit_code or 1,
        output=output + note,
        stdout=stdout,
        stderr=stderr,
        error=error,
        duration_s=outcome.duration_s,
        timed_out=outcome.timed_out,
        truncated=cap.truncated,
    )
