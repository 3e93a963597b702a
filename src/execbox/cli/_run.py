"""``execbox run`` (the code blocks of a model reply) and ``execbox exec``
(one piece of code)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError, NoCodeBlocksError
from .._extract import extract_code_blocks
from .._gpus import check_gpu_backend
from .._models import CodeBlock, ExecutionResult, Limits, one_line
from .._run_events import BlockStartEvent, EndEvent, OutputEvent
from ..backends import DEFAULT_BACKEND, Executor, backend_names, create_executor
from ._kept_workspace import cli_workspace
from ._limit_options import add_limit_options, as_flags, limits_from
from ._progress import progress_printer
from ._source_language import language_of_file


def register(commands: argparse._SubParsersAction) -> None:
    run = commands.add_parser("run", help="run the code blocks of a model reply (markdown)")
    run.add_argument("file", metavar="FILE", help="the reply, a markdown file; - reads standard input")
    _common(run)
    run.set_defaults(handler=run_reply)

    exe = commands.add_parser("exec", help="run one piece of code")
    exe.add_argument(
        "-l",
        "--language",
        default=None,
        help="language of the code (default: from FILE's suffix, as judge takes it; python for -c, "
        "standard input or a FILE without one)",
    )
    source = exe.add_mutually_exclusive_group(required=True)
    source.add_argument("-c", "--code", help="the code itself")
    source.add_argument(
        "file", nargs="?", metavar="FILE", help="a file with the code; - reads standard input"
    )
    exe.add_argument("--stdin", default=None, metavar="FILE", help="a file given to the program as its stdin")
    _common(exe)
    exe.set_defaults(handler=run_code)


def _common(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"where to run: {', '.join(backend_names())} (default: {DEFAULT_BACKEND})",
    )
    cmd.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds per block (default: 60)"
    )
    add_limit_options(cmd)
    cmd.add_argument(
        "--max-output-bytes",
        type=int,
        default=Limits().max_output_bytes,
        metavar="N",
        help="output kept per block (default: 1 MiB)",
    )
    cmd.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help="workspace directory (default: a temporary one, kept when the blocks leave files in it, "
        "else removed)",
    )
    cmd.add_argument(
        "-p",
        "--package",
        action="append",
        default=[],
        metavar="PKG",
        help="run in a virtual environment with this package (repeatable)",
    )
    cmd.add_argument(
        "--gpus",
        default=None,
        metavar="all|0,1",
        help="NVIDIA GPUs the blocks may use: all, or indices/UUIDs (sandbox and docker backends)",
    )
    cmd.add_argument("--json", action="store_true", help="print the result as JSON")
    cmd.add_argument(
        "--live",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="show output as it is printed, then the exit code (default: when standard output is "
        "a terminal; exec always does); --no-live prints the result for a model at the end",
    )


def run_reply(args: argparse.Namespace) -> int:
    text = _read(args.file)
    blocks = extract_code_blocks(text)
    if not blocks:
        raise NoCodeBlocksError(
            f"no code blocks found in {'standard input' if args.file == '-' else args.file}: "
            "a block is fenced with ``` (or ~~~) on lines of their own"
        )
    return _execute(args, blocks)


def run_code(args: argparse.Namespace) -> int:
    language = language_of_file(None if args.code is not None else args.file, args.language, "python")
    code = args.code if args.code is not None else _read(args.file)
    stdin = None if args.stdin is None else _read(args.stdin)
    return _execute(args, [CodeBlock(language, code, stdin=stdin)], raw=True)


def _execute(args: argparse.Namespace, blocks: list[CodeBlock], raw: bool = False) -> int:
    options: dict[str, Any] = {
        "limits": limits_from(args, timeout_s=args.timeout, max_output_bytes=args.max_output_bytes),
    }
    if args.gpus:
        check_gpu_backend(args.backend, "--gpus", "drop --gpus or pick one of them with --backend")
        options["gpus"] = args.gpus
    if args.package:
        from ..environments import Venv

        options["environment"] = Venv(packages=args.package)
        options["on_progress"] = progress_printer()
    live = not args.json and (args.live if args.live is not None else raw or sys.stdout.isatty())
    with (
        cli_workspace(args.workdir) as workdir,
        create_executor(args.backend, workspace=workdir, **options) as executor,
    ):
        if live:
            result = _run_live(executor, blocks, raw)
        else:
            result, seen = _run_quiet(executor, blocks) if not args.json else (executor.run(blocks), "")
            if args.json:
                print(json.dumps(_json(result), indent=2))
            elif raw:
                sys.stdout.write(_flagged(result.output, seen))
            else:
                text = result.to_text()
                cut = text.find(_BODY) + len(_BODY)  # the status line, then the blocks' text
                print(_flagged(text, text[:cut] + seen if cut >= len(_BODY) else None))
    return result.exit_code


_BODY = "Code output: "  # where to_text's body begins


def _run_quiet(executor: Executor, blocks: list[CodeBlock]) -> tuple[ExecutionResult, str]:
    """The result, and what the blocks printed (the head of its output that
    is theirs, never rewritten: the rest is execbox's notes)."""
    printed: list[str] = []
    result: ExecutionResult | None = None
    events = executor.stream(blocks)
    try:
        for event in events:
            if isinstance(event, OutputEvent):
                printed.append(event.text)
            elif isinstance(event, EndEvent):
                result = event.result
    finally:
        events.close()
    assert result is not None  # the stream always ends with the result
    return result, "".join(printed)


def _flagged(text: str, head: str | None) -> str:
    """``text`` with the limits execbox's notes name as the options that
    set them, past ``head`` (what the blocks printed, or the status line):
    a block's own words are shown as it printed them."""
    if head is not None and text.startswith(head):
        return head + as_flags(text[len(head) :])
    return text


def _run_live(executor: Executor, blocks: list[CodeBlock], raw: bool) -> ExecutionResult:
    """Print each stream's text to ours as it comes (a header per block when
    there are several), then what the result adds: execbox's notes (a
    timeout...) and, unless ``raw``, the exit code and the files changed."""
    printed: list[str] = []
    events = executor.stream(blocks)
    result: ExecutionResult | None = None
    try:
        for event in events:
            if isinstance(event, OutputEvent):
                printed.append(event.text)
                out = sys.stderr if event.stream == "stderr" else sys.stdout
                out.write(event.text)
                out.flush()
            elif isinstance(event, BlockStartEvent) and len(blocks) > 1 and not raw:
                language = (
                    one_line(event.language) if event.language else "no language"
                )  # the model's, as written
                sys.stdout.write(f"--- block {event.index + 1} ({language}) ---\n")
                sys.stdout.flush()
            elif isinstance(event, EndEvent):
                result = event.result
    finally:
        events.close()  # on Ctrl-C: kills the run
    assert result is not None  # the stream always ends with the result
    seen = "".join(printed)
    notes = result.output[len(seen) :] if result.output.startswith(seen) else ""
    notes = as_flags(notes)  # execbox's own words, the limits named as the options that set them
    if raw:
        sys.stdout.write(notes)
        return result
    tail = as_flags(result.to_text("plain")[len(result.output) :])
    if notes or tail:
        sys.stdout.write((notes + tail).strip("\n") + "\n")
    state = "execution succeeded" if result.exit_code == 0 else "execution failed"
    print(f"exitcode: {result.exit_code} ({state})")
    return result


def _json(result: ExecutionResult) -> dict[str, Any]:
    data = result.to_dict()
    return {
        "exit_code": data["exit_code"],
        "output": data["output"],
        "timed_out": data["timed_out"],
        "truncated": data["truncated"],
        "error": data["error"],
        "files": data["files"],
        "duration_s": data["duration_s"],
        "blocks": data["blocks"],
    }


def _read(name: str | None) -> str:
    if name is None:
        raise ConfigurationError("give the code with -c CODE or a FILE (- for standard input)")
    if name == "-":
        return sys.stdin.read()
    path = Path(name)
    if not path.is_file():
        raise ConfigurationError(f"no such file: {name}")
    return path.read_text(encoding="utf-8", errors="replace")
