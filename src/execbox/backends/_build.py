"""Compiled languages: a block's build, once per (language, toolchain
version, flags, source), then its program run like any block.

The build folder is ``.execbox/build/<key>/``: the key is a SHA-256 of
every input of the compile: the language, the toolchain (its version,
``Language.version``, asked once per program and PATH, and which program
file it is), the compile command and environment, the files written beside
the source, the source itself, and the workspace's files as they are (each
one's path, size and modification time: a compiler can read them, as
``#include "../../../x.h"`` does; a header changed is a new build). The
host empties the folder and writes the source there; the compiler runs as a
block does (in the sandbox: a jail of its own under the blocks' limits but
``Limits.compile_timeout_s``, with that folder and the language's cache
folder writable inside the otherwise sealed ``.execbox/``; its memory bounded
by the block's cgroup, or where there is none by ``RLIMIT_DATA``, which a
JVM's or Node.js's reservations do not count against); the host marks the
folder built once the compiler succeeds and, as root, takes it back from
the identity the compiler ran as (``seal``): what it built is read-only to
every later block, on every backend and tier. A marked folder is not
compiled again: the same solution run against many inputs compiles once.
The folder belongs to the executor's workspace, so builds, and Go's build
cache (``.execbox/build/cache-go``), are never shared with another
executor's blocks; the service empties them between requests.

A compiler that fails (or runs out of time or memory) gives the block
``status="compile_error"`` with the compiler's output.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from .._errors import WorkspaceError
from .._languages import PYTHON, Language, resolve_program
from .._models import BlockResult, ErrorInfo, Limits, one_line
from .._nofollow import open_folders
from .._workspace import INTERNAL_DIR
from ._blocks import failed_block
from ._process import Cancellation, OutputCallback, ProcessOutcome, run_process
from ._result import Outcome

if TYPE_CHECKING:
    from ._executor_api import ExecutorLike

__all__ = [
    "BUILD_DIR",
    "BuildPlan",
    "build_and_run",
    "compile_failure",
    "ensure_built",
    "plan_build",
    "toolchain_version",
    "workspace_inputs",
]

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


def plan_build(language: Language, code: str, root: str, version: str, inputs: str = "") -> BuildPlan:
    """Where and how ``code`` is built in the workspace at ``root``
    (``inputs``: ``workspace_inputs``, what else the compiler may read)."""
    build = language.build
    assert build is not None
    main = build.main_of(code) if build.main_of is not None else build.main
    cache = f"{BUILD_DIR}/cache-{language.name}"
    digest = hashlib.sha256()
    for part in (language.name, version, inputs, *build.compile, *(f"{k}={v}" for k, v in build.env)):
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


def workspace_inputs(executor: ExecutorLike) -> str:
    """A digest of the workspace's files a compiler may read (each one's
    path, size and modification time; ``.execbox/`` left out: execbox's)."""
    found = executor.workspace.snapshot()
    digest = hashlib.sha256(b"complete" if found.complete else b"partial")
    for path, (mtime_ns, size, _) in sorted(found.items()):
        digest.update(f"{path}\0{size}\0{mtime_ns}\0".encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def build_and_run(
    executor: ExecutorLike,
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
    began = time.monotonic()
    built = ensure_built(executor, lang, code, common, cancel)
    if isinstance(built, BlockResult):
        return built
    compile_s = time.monotonic() - began  # the build step: its compile, or finding it built
    ran = executor._run_program(lang, built.run, cancel, on_output, stdin).to_block(common)
    return replace(ran, compile_duration_s=compile_s)


def ensure_built(
    executor: ExecutorLike, lang: Language, code: str, common: dict[str, Any], cancel: Cancellation
) -> BuildPlan | BlockResult:
    """The build of ``code`` (its plan, built), compiling it unless it is:
    else the block's result that says why it could not be (the compiler's
    errors, a cancellation, a folder execbox cannot write). The judge
    builds a program and its checkers so, before the first case runs."""
    lang = lang.installed(executor._has_program) or lang  # TypeScript: esbuild where installed, else tsc
    root = executor._build_root()
    plan = plan_build(lang, code, root, executor._toolchain_version(lang), workspace_inputs(executor))
    workspace = executor.workspace
    with _build_lock(executor, plan.key):
        if _is_built(executor, plan):
            return plan
        try:
            _empty_folder(executor, plan.folder)  # a clean folder: nothing left or planted in it is read
            for folder in plan.writable:
                os.close(workspace.internal_folder(folder))
            for name, text in ((plan.source, code), *plan.files):
                workspace.write_internal(name, text.encode("utf-8", "surrogatepass"))
        except (WorkspaceError, OSError) as exc:  # a link or FIFO in the way, not removable; a full disk
            return failed_block(common, lang.name, "CannotSave", f"cannot save the block to build it: {exc}")
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
        seal(executor, plan.folder)
        workspace.write_internal(plan.marker, b"")
    return plan


def _is_built(executor: ExecutorLike, plan: BuildPlan) -> bool:
    """Whether the folder holds a finished build: the host's mark is there,
    a regular file, and (as root) root's, never one a block planted."""
    *folders, name = plan.marker.split("/")
    try:
        parent = open_folders(
            executor.workspace.path, tuple(folders), plan.marker, create=False, repair=False
        )
    except (WorkspaceError, OSError):
        return False
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return False
    finally:
        os.close(parent)
    # as a user, blocks run as this user on some backends: its files prove nothing more
    return stat.S_ISREG(st.st_mode) and (os.geteuid() != 0 or st.st_uid == 0)


def _empty_folder(executor: ExecutorLike, folder: str) -> None:
    """Remove what ``folder`` (of ``.execbox/``) holds, from its parent's
    descriptor: a link in its place is removed, never followed."""
    *above, name = folder.split("/")
    parent = executor.workspace.internal_folder("/".join(above))
    try:
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            _open_up(parent, name)
            shutil.rmtree(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    finally:
        os.close(parent)


def _open_up(parent: int, name: str) -> None:
    """Make a folder the compiler left closed (mode 0) removable by the host (not root)."""
    if os.geteuid() == 0:
        return
    try:
        os.chmod(name, 0o700, dir_fd=parent)  # a folder, just checked: no block runs now
    except OSError:
        pass
    for _, dirs, _, fd in os.fwalk(name, dir_fd=parent, follow_symlinks=False):
        for sub in dirs:
            try:  # a folder, as fwalk (not following links) found it
                os.chmod(sub, 0o700, dir_fd=fd)
            except OSError:
                pass


def seal(executor: ExecutorLike, folder: str) -> None:
    """A finished build made the host's: as root, every entry of ``folder``
    owned by root, readable, with no write bit but root's and no set-ID bit,
    so no later block (the jail's id, a container's user) may change it.
    Walked by descriptor, no link followed. A host that is not root runs
    some backends' blocks as itself (the Landlock tier, Docker): nothing to
    take back from them there (the README says so)."""
    if os.geteuid() != 0:
        return
    fd = executor.workspace.internal_folder(folder)
    try:
        _seal_entry(fd, None)
        for _, dirs, files, dir_fd in os.fwalk(".", dir_fd=fd, follow_symlinks=False):
            for name in (*dirs, *files):
                _seal_entry(dir_fd, name)
    finally:
        os.close(fd)


def _seal_entry(parent: int, name: str | None) -> None:
    """One entry (``name`` in ``parent``; None: ``parent`` itself) made root's, by its descriptor."""
    try:
        if name is not None and stat.S_ISLNK(os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode):
            os.chown(name, 0, 0, dir_fd=parent, follow_symlinks=False)
            return
        fd = os.dup(parent) if name is None else os.open(name, _ENTRY_FLAGS, dir_fd=parent)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            if name is not None:  # a FIFO, a socket: no part of a build
                os.unlink(name, dir_fd=parent)
            return
        os.fchown(fd, 0, 0)
        os.fchmod(fd, 0o755 if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0o644)
    except OSError:
        pass
    finally:
        os.close(fd)


_ENTRY_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


_locks_guard = threading.Lock()


def _build_lock(executor: ExecutorLike, key: str) -> threading.Lock:
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
    try:  # which compiler, besides what it says it is: another one on another PATH is another build
        st = os.stat(program)
        identity = f"{program}\0{st.st_size}\0{st.st_mtime_ns}"
    except OSError:
        identity = program
    with _versions_lock:
        if key in _versions:
            return f"{_versions[key]}\0{identity}"
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
    return f"{version}\0{identity}"


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
