"""A run's blocks, one after the other, written once for every backend
(``Executor._run_blocks`` calls ``run_blocks``): each block's language
checked against the executor's policies (``unsupported``: why one is not
run), its code file written (or not, where the backend runs it from its
text), the block run, built or saved, its file removed after where nobody
keeps it; around them the workspace's change report and the run's events.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import time
from typing import Any

from .._errors import PathEscapeError, WorkspaceError
from .._languages import Language, find_language, silence_pip
from .._models import BlockResult, CodeBlock, ErrorInfo, ExecutionResult, one_line
from .._run_events import BlockStartEvent, EndEvent, EventSink, StartEvent
from .._unserved import why_unserved
from .._workspace import INTERNAL_DIR, Workspace
from ._blocks import aggregate, failed_block
from ._build import build_and_run
from ._executor_api import ExecutorLike
from ._network_hint import with_network_hint
from ._process import Cancellation, OutputCallback

__all__ = ["CODE_DIR", "run_blocks", "unsupported"]

# Code files of blocks without a filename; left out of the change report.
CODE_DIR = f"{INTERNAL_DIR}/code"


def run_blocks(
    executor: ExecutorLike, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink
) -> ExecutionResult:
    with executor._state_lock:  # before start: a restart from now on cancels this run
        executor._active.add(cancel)
    try:
        executor.start()
        sink.emit(StartEvent(len(blocks)))
        started = time.monotonic()
        run_id = secrets.token_hex(8)
        internal = executor._blocks_write_internal
        before = executor.workspace.snapshot(clear_setid=True, internal=internal)
        results: list[BlockResult] = []
        written: list[str] = []
        for index, block in enumerate(blocks):
            sink.block = index
            sink.emit(BlockStartEvent(index, block.language))
            result = _run_block(executor, index, block, run_id, cancel, sink, written)
            results.append(result)
            sink.block_ended(result)
            if result.status not in ("ok", "saved"):
                break
        after = executor.workspace.snapshot(
            clear_setid=True,  # no set-ID program left for the host
            internal=executor._blocks_write_internal,
        )
        changed = [p for p in Workspace.changes(before, after) if p not in written]
        outcome = aggregate(
            results,
            changed,
            written,
            time.monotonic() - started,
            executor.name,
            files_truncated=not (before.complete and after.complete),
        )
        sink.emit(EndEvent(outcome, "cancelled" if cancel.is_set() else "completed"))
        return outcome
    finally:
        with executor._state_lock:
            executor._active.discard(cancel)


def _run_block(
    executor: ExecutorLike,
    index: int,
    block: CodeBlock,
    run_id: str,
    cancel: Cancellation,
    on_output: OutputCallback | None,
    written: list[str],
) -> BlockResult:
    common: dict[str, Any] = {"index": index, "language_inferred": block.language_inferred}
    checked = _checked(executor, block, common)
    if isinstance(checked, BlockResult):
        return checked
    lang, policy = checked
    code = silence_pip(block.code, lang.name) if executor.silence_pip else block.code
    relative = block.filename or f"{CODE_DIR}/{run_id}_{index}{lang.suffix}"
    # asked once: the backend is told (_execute_code), and a file nobody keeps is never written
    from_text = policy == "execute" and executor._runs_from_text(lang, code)
    unwritten = not block.filename and not executor.keep_code_files and from_text
    try:
        if block.filename:
            saved = executor.workspace.write_text(relative, code)
            relative = os.path.relpath(saved, executor.workspace.path)
        elif not unwritten:
            executor._write_internal(relative, code)
    except WorkspaceError as exc:  # a link, a FIFO... left where the block is to be saved
        if isinstance(exc, PathEscapeError):  # AG2's and AutoGen's words, which their users look for
            return failed_block(common, lang.name, "PathEscape", f"Filename is not in the workspace: {exc}")
        return failed_block(common, lang.name, "CannotSave", f"cannot save the block: {exc}")
    if not unwritten:
        written.append(relative)
        common["code_file"] = relative
    if policy == "save":
        return BlockResult(
            **common, status="saved", exit_code=0, output=f"Code saved to {one_line(relative)}\n"
        )
    if cancel.is_set():
        result = BlockResult(
            **common,
            status="cancelled",
            exit_code=130,
            output="Cancelled before it ran.\n",
            error=ErrorInfo("Cancelled", "cancelled before it ran"),
        )
    elif lang.build is not None:
        result = build_and_run(executor, lang, code, common, cancel, on_output, block.stdin)
    else:
        extra: dict[str, Any] = {} if block.stdin is None else {"stdin": block.stdin}
        outcome = executor._execute_code(
            lang,
            relative if not relative.startswith("-") else f"./{relative}",
            code,
            cancel,
            on_output,
            from_text=from_text,
            **extra,
        )
        result = outcome.to_block(common)
    if not executor.keep_code_files and not block.filename and not unwritten:  # a named block's: kept
        executor.workspace.remove_internal(relative)
        written.remove(relative)
        result = dataclasses.replace(result, code_file=None)
    return with_network_hint(result, executor.limits, lambda: executor.capabilities.enforced)


def _checked(
    executor: ExecutorLike, block: CodeBlock, common: dict[str, Any]
) -> tuple[Language, str] | BlockResult:
    """The block's language and its policy, or the failed block where the
    executor does not take it (``common`` gets the language's name)."""
    lang = find_language(block.language)
    if lang is None or (
        executor.policies[lang.name] == "execute" and lang.name not in executor.capabilities.languages
    ):
        return failed_block(
            common,
            block.language.strip().lower() or "(none)",
            "UnsupportedLanguage",
            unsupported(executor, block.language, lang),
        )
    common["language"] = lang.name
    policy = executor.policies[lang.name]
    if block.stdin is not None and not executor.takes_stdin and policy == "execute":
        return failed_block(
            common,
            lang.name,
            "StdinUnsupported",
            f"the {executor.name} backend gives blocks no stdin: run it on the sandbox or local backend, "
            "or drop CodeBlock(stdin=...)",
        )
    if policy == "refuse":
        return failed_block(
            common,
            lang.name,
            "RefusedLanguage",
            f"{lang.name} blocks are refused by this executor's execution_policies; "
            f"set execution_policies={{'{lang.name}': 'execute'}} to run them",
        )
    return lang, policy


def unsupported(executor: ExecutorLike, given: str, lang: Language | None) -> str:
    """Why ``executor`` does not run a block of language ``given`` (``lang``:
    the language execbox knows by that name, if any), and what does."""
    name = executor.name
    runs = ", ".join(executor.capabilities.languages)
    saves = ", ".join(n for n, p in executor.policies.items() if p == "save")
    if lang is not None and lang.build is not None and not executor.compiles:
        return (
            f"{lang.name} is compiled, and the {name} backend does not build compiled languages: "
            f"run it on the sandbox (or local) backend. This {name} executor runs: {runs}"
        )
    scope = executor.language_scope
    if lang is not None and scope is not None and lang.name not in scope[0]:
        return (
            f"the {name} backend does not run {lang.name}: {scope[1]}. The sandbox, local and "
            f"docker backends run {lang.name} where {lang.program} is installed. This {name} "
            f"executor runs: {runs}"
        )
    if lang is not None:
        hint = f" ({lang.install_hint})" if lang.install_hint else ""
        return (
            f"{lang.name} cannot run here: {lang.program} is not installed where the {name} "
            f"executor runs blocks{hint}. This {name} executor runs: {runs}"
        )
    why = why_unserved(given)  # one execbox knows it does not run: why not
    return (
        f"Unsupported language {given.strip() or '(none)'!r}{f' ({why})' if why else ''}: this "
        f"{name} executor runs {runs}; it saves {saves} without running them"
    )
