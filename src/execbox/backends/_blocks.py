"""A run's blocks: the ones given checked, the result of a block that
could not run, and the run's result made of its blocks' results."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .._errors import NoCodeBlocksError
from .._models import BlockResult, CodeBlock, ErrorInfo, ExecutionResult

__all__ = ["aggregate", "as_blocks", "failed_block"]


def failed_block(common: dict[str, Any], language: str, name: str, message: str) -> BlockResult:
    fields = {"language": language, **common}
    return BlockResult(
        **fields,
        status="unsupported" if name == "UnsupportedLanguage" else "failed",
        exit_code=1,
        output=message + "\n",
        stderr=message + "\n",
        error=ErrorInfo(name, message),
    )


def as_blocks(blocks: CodeBlock | Iterable[CodeBlock]) -> list[CodeBlock]:
    todo = [blocks] if isinstance(blocks, CodeBlock) else list(blocks)
    if not todo:
        raise NoCodeBlocksError(
            "no code blocks to run: pass at least one CodeBlock (extract_code_blocks() "
            "returned none? the message may have no closed ``` fence)"
        )
    for block in todo:
        if not isinstance(block, CodeBlock):
            raise NoCodeBlocksError(f"run() takes CodeBlock objects, not {type(block).__name__}")
    return todo


def aggregate(
    results: list[BlockResult],
    files: list[str],
    written: list[str],
    duration: float,
    backend: str,
    *,
    files_truncated: bool,
) -> ExecutionResult:
    last = results[-1]
    failed = next((r for r in results if r.error is not None), None)
    return ExecutionResult(
        exit_code=last.exit_code,
        output="".join(r.output for r in results),
        stdout="".join(r.stdout for r in results),
        stderr="".join(r.stderr for r in results),
        error=failed.error if failed else None,
        displays=tuple(d for r in results for d in r.displays),
        files=tuple(files),
        files_truncated=files_truncated,
        code_files=tuple(written),
        duration_s=duration,
        timed_out=any(r.timed_out for r in results),
        truncated=any(r.truncated for r in results),
        blocks=tuple(results),
        backend=backend,
    )
