"""What a backend can do (``Capabilities``) and the executor as the modules
it drives see it (``ExecutorLike``): the block run (``_block_run.py``), the
builds (``_build.py``) and the judge (``_judging.py``,
``_judge_checkers.py``) take an ``ExecutorLike``, never ``_base``'s
``Executor``, so that the base class calls them and none of them imports it.

``ExecutorLike`` lists only what they use; ``Executor`` matches it (mypy
checks each call).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._languages import Language, Policy
    from .._models import CodeBlock, ExecutionResult, Limits
    from .._run_events import RunEvent
    from .._workspace import Workspace
    from ..environments._base import Environment
    from ._process import Cancellation, OutputCallback, ProcessOutcome
    from ._result import Outcome

__all__ = ["Capabilities", "ExecutorLike"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. ``enforced`` names the ``Limits`` fields it
    enforces; ``languages`` the languages it can execute here. Where a
    backend says: ``mechanisms``, how each enforced limit holds on this
    host; ``gaps``, for a limit it cannot hold here, why and the fix."""

    backend: str
    isolated: bool
    stateful: bool
    enforced: frozenset[str]
    languages: tuple[str, ...]
    mechanisms: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)
    gaps: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False)


class ExecutorLike(Protocol):
    """The members of ``Executor`` (``_base.py``, where each is described)
    that the block run, the builds and the judge use."""

    workspace: Workspace
    limits: Limits
    policies: dict[str, Policy]
    silence_pip: bool
    keep_code_files: bool
    _state_lock: threading.Lock
    _active: set[Cancellation]
    _blocks_write_internal: bool | Sequence[str]
    _init_options: dict[str, Any]

    def __init__(self, **options: Any) -> None: ...

    @property
    def name(self) -> str: ...
    @property
    def takes_stdin(self) -> bool: ...
    @property
    def compiles(self) -> bool: ...
    @property
    def language_scope(self) -> tuple[frozenset[str], str] | None: ...
    @property
    def capabilities(self) -> Capabilities: ...
    @property
    def environment(self) -> Environment | None: ...

    def start(self) -> None: ...
    def close(self) -> None: ...
    def run(
        self,
        blocks: CodeBlock | Sequence[CodeBlock],
        *,
        on_output: Callable[[str, str], None] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> ExecutionResult: ...
    async def arun(
        self,
        blocks: CodeBlock | Sequence[CodeBlock],
        *,
        on_output: Callable[[str, str], None] | None = None,
        on_event: Callable[[RunEvent], None] | None = None,
    ) -> ExecutionResult: ...

    # the hooks a backend provides
    def _execute_code(
        self,
        language: Language,
        code_path: str,
        code: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None = None,
        *,
        from_text: bool = False,
    ) -> Outcome: ...
    def _compile(
        self, argv: list[str], *, folders: tuple[str, ...], env: dict[str, str], cancel: Cancellation
    ) -> ProcessOutcome: ...
    def _run_program(
        self,
        language: Language,
        argv: list[str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None,
    ) -> Outcome: ...
    def _has_program(self, name: str) -> bool: ...
    def _toolchain_version(self, language: Language) -> str: ...
    def _build_root(self) -> str: ...
    def _give_build(self, folders: tuple[str, ...]) -> None: ...
    def _write_internal(self, relative: str, code: str) -> None: ...
    def _runs_from_text(self, language: Language, code: str) -> bool: ...
