"""Value objects that flow through execbox: CodeBlock in, ExecutionResult out."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ._errors import ConfigurationError
from ._workspace import MAX_DEPTH, MAX_SCANNED_ENTRIES

__all__ = [
    "BlockResult",
    "CodeBlock",
    "Display",
    "ErrorInfo",
    "ExecutionResult",
    "Limits",
]

MiB = 1024 * 1024
# What a block gets where a backend confines it and Limits leaves a field
# unset (``Limits.effective_max_processes``), and the rlimits no Limits field sets.
DEFAULT_MAX_PROCESSES = 512
DEFAULT_OPEN_FILES = 1024
DEFAULT_FILE_SIZE_MB = 1024

BlockStatus = Literal[
    "ok", "failed", "timeout", "saved", "refused", "unsupported", "cancelled", "compile_error"
]


@dataclass(frozen=True)
class CodeBlock:
    """One piece of code to run.

    ``language`` is as written (aliases such as ``py`` are resolved when it
    runs); ``filename`` is where to save it inside the workspace, if the model
    asked for one; ``language_inferred`` says the language was guessed
    because the fence named none; ``stdin`` is the program's standard input
    (None: an empty one).
    """

    language: str
    code: str
    filename: str | None = None
    language_inferred: bool = field(default=False, kw_only=True)
    stdin: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        if self.stdin is not None and not isinstance(self.stdin, str):
            raise ConfigurationError(
                f"CodeBlock.stdin must be a str or None, not {type(self.stdin).__name__}"
            )
        if not isinstance(self.code, str):
            raise ConfigurationError(f"CodeBlock.code must be a str, not {type(self.code).__name__}")
        if not isinstance(self.language, str):
            raise ConfigurationError(
                f"CodeBlock.language must be a str such as 'python', not {type(self.language).__name__}"
            )


@dataclass(frozen=True, kw_only=True)
class Limits:
    """What one block may use. One value object for every backend.

    - ``timeout_s``: wall-clock seconds per block; on expiry everything the
      block started is killed and the result has exit code 124.
    - ``memory_mb``: memory per block (None: no limit where the backend does
      not isolate; the sandbox, docker and a sandboxed Jupyter kernel give
      half the machine's memory, at most 8 GiB: ``effective_memory_mb()``).
    - ``max_processes``: processes/threads per block (None: no limit where
      the backend does not isolate; 512 where it does:
      ``effective_max_processes()``).
    - ``cpus``: CPU time per wall-clock second, in cores (0.5 = half a
      core; None: no limit).
    - ``max_output_bytes``: output kept per block; the rest is dropped with a
      marker (the head and the tail are kept). Rich displays of a Jupyter
      kernel (images, HTML...) have a budget of the same size per block:
      those past it are dropped and the output says so.
    - ``network``: True allows network, False forbids it, None takes the
      backend's default (off where the backend isolates).
    - ``compile_timeout_s``: wall-clock seconds a compiled language's
      compiler may take (its program then has ``timeout_s``).
    - ``gpu_memory_mb``: GPU memory the block's processes may hold, on the
      GPUs given with ``gpus=`` (the sandbox: read from NVML while the block
      runs; past it the block is killed and the result names this limit).

    A backend that cannot enforce a limit that is set warns once and says so
    in ``executor.capabilities``.
    """

    timeout_s: float = 60.0
    memory_mb: int | None = None
    max_processes: int | None = None
    max_output_bytes: int = 1 * MiB
    network: bool | None = None
    cpus: float | None = None
    gpu_memory_mb: int | None = None
    compile_timeout_s: float = 60.0

    def __post_init__(self) -> None:
        for name in ("timeout_s", "compile_timeout_s"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0):
                raise ConfigurationError(f"Limits.{name} must be a positive number of seconds, got {value!r}")
        for name in ("memory_mb", "max_processes", "gpu_memory_mb"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, int) and value > 0):
                raise ConfigurationError(
                    f"Limits.{name} must be a positive whole number or None, got {value!r}"
                )
        if not (isinstance(self.max_output_bytes, int) and self.max_output_bytes >= 1024):
            raise ConfigurationError(
                "Limits.max_output_bytes must be a whole number of at least 1024, "
                f"got {self.max_output_bytes!r}"
            )
        if self.cpus is not None and not (isinstance(self.cpus, (int, float)) and 0.01 <= self.cpus <= 1024):
            raise ConfigurationError(
                f"Limits.cpus must be a number of cores between 0.01 and 1024, or None, got {self.cpus!r}"
            )
        if self.network not in (None, True, False):
            raise ConfigurationError(f"Limits.network must be True, False or None, got {self.network!r}")

    def replace(self, **changes: Any) -> Limits:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def effective_memory_mb(self) -> int:
        """The memory limit an isolating backend enforces: ``memory_mb``, or
        half of this machine's memory (at most 8 GiB) when it is unset."""
        return self.memory_mb or default_memory_mb()

    def effective_max_processes(self) -> int:
        """The process limit an isolating backend enforces: ``max_processes``,
        or ``DEFAULT_MAX_PROCESSES`` when it is unset."""
        return self.max_processes or DEFAULT_MAX_PROCESSES


def default_memory_mb() -> int:
    """Half of this machine's memory, at most 8 GiB."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1024 * 1024)
    except (ValueError, OSError):
        return 4096
    return max(256, min(8192, total // 2))


@dataclass(frozen=True)
class ErrorInfo:
    """Why a block failed: an exception's name and value, or an execbox reason
    (``Timeout``, ``UnsupportedLanguage``, ``PathEscape``, ``CannotSave``, ``ExitStatus``...)."""

    name: str
    value: str
    traceback: str = ""


@dataclass(frozen=True)
class Display:
    """A rich output (an image, HTML, JSON...) produced by a run: its file's
    ``path`` (workspace-relative; absolute when ``JupyterExecutor(output_dir=...)``
    is outside the workspace) or its inline ``data``."""

    mime_type: str
    path: str | None = None
    data: str | None = None


@dataclass(frozen=True, kw_only=True)
class BlockResult:
    """The outcome of one code block."""

    index: int
    language: str
    language_inferred: bool = False
    status: BlockStatus
    exit_code: int
    output: str
    stdout: str = ""
    stderr: str = ""
    error: ErrorInfo | None = None
    code_file: str | None = None
    displays: tuple[Display, ...] = ()
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    peak_memory_mb: float | None = None  # where the backend measures it (a block's cgroup)
    # a compiled language's build step, apart from duration_s (its program's run); None: not compiled
    compile_duration_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return _plain(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BlockResult:
        """The inverse of ``to_dict`` (keys this version does not know are ignored)."""
        return cls(**_fields(cls, data))


@dataclass(frozen=True, kw_only=True)
class ExecutionResult:
    """The outcome of a run of one or more blocks.

    ``output`` is what a person at a terminal would have seen (stdout and
    stderr interleaved in the order they arrived, then execbox's own notes
    such as a timeout; the streams are two pipes, so two writes to different
    streams less than about a millisecond apart may show in either order);
    ``stdout``/``stderr`` are the separated streams. ``files`` are the paths,
    relative to the workspace, that the run created or changed (names as the
    file system gives them, usable with ``os`` and the workspace; rendered
    escaped by ``to_text`` and ``to_dict``); ``files_truncated`` says the
    workspace was too big to check whole, so more may have changed;
    ``code_files`` where the blocks were written. ``blocks`` holds one result
    per block that was reached (a run stops at the first failure).
    """

    exit_code: int
    output: str
    stdout: str = ""
    stderr: str = ""
    error: ErrorInfo | None = None
    displays: tuple[Display, ...] = ()
    files: tuple[str, ...] = ()
    files_truncated: bool = False
    code_files: tuple[str, ...] = ()
    duration_s: float = 0.0
    timed_out: bool = False
    truncated: bool = False
    blocks: tuple[BlockResult, ...] = ()
    backend: str = ""
    node: str = ""  # the Ray node that ran it ("" on one machine)

    @property
    def ok(self) -> bool:
        """True when every block that ran succeeded."""
        return self.exit_code == 0

    def to_text(self, style: Literal["ag2", "plain"] = "ag2") -> str:
        """Render for a model.

        ``ag2`` (the default) is the format AG2 agents expect::

            exitcode: 0 (execution succeeded)
            Code output: ...

        ``plain`` is the output alone, with execbox's notes.

        The status line comes first; file names with control characters (a
        newline could forge a status line) or bytes that are not UTF-8 are
        shown escaped, in quotes (``one_line``); the text always encodes as UTF-8.
        """
        if style not in ("ag2", "plain"):
            raise ConfigurationError(f"unknown style {style!r}: use 'ag2' or 'plain'")
        notes = []
        if self.files or self.files_truncated:
            note = "Files created or changed: " + (", ".join(one_line(f) for f in self.files) or "none seen")
            if self.files_truncated:
                note += (
                    f" (the workspace is too big to check whole: the change report stopped after "
                    f"{MAX_SCANNED_ENTRIES} entries or {MAX_DEPTH} folders deep, so more may have changed)"
                )
            notes.append(note)
        body = self.output
        if notes:
            body = (body.rstrip("\n") + "\n" if body.strip() else "") + "\n".join(notes)
        if style == "plain":
            return _utf8(body)
        state = "execution succeeded" if self.exit_code == 0 else "execution failed"
        return _utf8(f"exitcode: {self.exit_code} ({state})\nCode output: {body}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (for tools and HTTP); every string encodes as
        UTF-8 (bytes of file names that are not UTF-8 shown as ``\\xff``)."""
        return _plain(self)

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ExecutionResult:
        """The inverse of ``to_dict`` (as the HTTP service sends it; keys
        this version does not know are ignored)."""
        return cls(**_fields(cls, data))


def _fields(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data``'s known fields of ``cls``, the nested ones made objects again."""
    out: dict[str, Any] = {}
    for name in cls.__dataclass_fields__:  # type: ignore[attr-defined]
        if name not in data:
            continue
        value = data[name]
        if name == "error" and value is not None:
            value = ErrorInfo(**{k: value[k] for k in ("name", "value", "traceback") if k in value})
        elif name == "displays":
            value = tuple(Display(d["mime_type"], d.get("path"), d.get("data")) for d in value)
        elif name == "blocks":
            value = tuple(BlockResult.from_dict(b) for b in value)
        elif isinstance(value, list):
            value = tuple(value)
        out[name] = value
    return out


def _plain(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, (list, tuple)):
        return [_plain(item) for item in obj]
    if isinstance(obj, str):
        return _utf8(obj)
    return obj


def _utf8(text: str) -> str:
    """``text`` made encodable as UTF-8: the lone surrogates by which Python
    carries bytes that are not UTF-8 (file names, surrogate-escaped) become
    ``\\xff``; any other lone surrogate (from a kernel's JSON) ``\\udXXX``."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        pass
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_ESCAPES = {"'": "\\'", "\\": "\\\\"}


def one_line(text: str) -> str:
    """What a block controls (a file name, a language, an error's name),
    made safe for a line of text a model or a person reads: as it is when
    every character is printable, else in quotes with the rest escaped as
    Python writes them (``\\n``, ``\\r``, ``\\x1b``, ``\\x85``, ``\\u2028``...; a
    byte that is not UTF-8 as ``\\xff``), so that it can neither start a line
    of its own (a forged ``exitcode: 0``) nor move a terminal's cursor."""
    if text.isprintable():
        return text
    return "'" + "".join(_ESCAPES.get(ch, ch) if ch.isprintable() else _escape(ch) for ch in text) + "'"


def _escape(char: str) -> str:
    if 0xDC80 <= ord(char) <= 0xDCFF:  # a byte that was not UTF-8 (surrogateescape)
        return f"\\x{ord(char) - 0xDC00:02x}"
    return repr(char)[1:-1]
