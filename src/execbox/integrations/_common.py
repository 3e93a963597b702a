"""What the AG2 and AutoGen adapters share: choosing the execbox executor,
turning a framework's code block (code + language) into an execbox
``CodeBlock``, and the paths a result reports. No framework is imported here.
"""

from __future__ import annotations

from typing import Any

from .._errors import ConfigurationError
from .._extract import _filename_comment, infer_language
from .._models import CodeBlock, ExecutionResult
from ..backends import Executor, create_executor

__all__ = ["as_execbox_block", "code_file", "make_executor", "output_files"]


def make_executor(
    owner: str, executor: Executor | None, backend: str | None, options: dict[str, Any]
) -> Executor:
    """The executor an adapter wraps: the one given, or a new one of
    ``backend`` made with ``options``."""
    if executor is None:
        return create_executor(backend, **options)
    if not isinstance(executor, Executor):
        raise ConfigurationError(
            f"{owner}(executor=...) takes an execbox executor such as execbox.LocalExecutor(), "
            f"not {type(executor).__name__}; or give backend='sandbox' (and its options) instead"
        )
    if backend is not None or options:
        given = ", ".join(["backend"] * (backend is not None) + sorted(options))
        raise ConfigurationError(
            f"{owner} got an executor and also {given}: set those options on the executor you "
            "pass, or pass no executor and let the adapter make one"
        )
    return executor


def as_execbox_block(code: str, language: str | None, filename: str | None = None) -> CodeBlock:
    """An execbox block from a framework's block.

    A block without a language gets one inferred (as execbox's own extractor
    does); a filename comment on the first line (``# filename: x.py``, or
    a bare ``# x.py`` as the frameworks read it) names the file when the
    framework's extractor dropped it.
    """
    if not isinstance(code, str):
        raise ConfigurationError(f"a code block's code must be a str, not {type(code).__name__}")
    language = (language or "").strip()
    inferred = not language
    if inferred:
        language = infer_language(code)
    return CodeBlock(
        language, code, filename or _filename_comment(code, language), language_inferred=inferred
    )


def code_file(executor: Executor, result: ExecutionResult) -> str | None:
    """The absolute path of the first block's code file, as AG2 and AutoGen
    report it (``code_file``)."""
    if not result.code_files:
        return None
    return str(executor.workspace.path / result.code_files[0])


def output_files(executor: Executor, result: ExecutionResult) -> list[str]:
    """Absolute paths of the files the run created or changed."""
    return [str(executor.workspace.path / name) for name in result.files]
