"""``execbox chat "task"``: a model writes code, execbox runs it, you watch
(and guide: Enter runs the code, text goes to the model, ``exit`` stops).
``--tools``: the model calls execbox's tools instead (function calling).
``--provider anthropic`` (or a ``claude-*`` model) speaks Anthropic's API."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from ..backends import DEFAULT_BACKEND, backend_names, create_executor
from ._kept_workspace import cli_workspace
from ._limit_options import add_limit_options, limits_from

__all__ = ["add_model_options", "ask_person", "register"]

DEFAULT_MODEL = "gpt-4o-mini"


def register(commands: argparse._SubParsersAction) -> None:
    chat = commands.add_parser(
        "chat", help="a model writes code for a task and execbox runs it, turn by turn"
    )
    chat.add_argument("task", help="what to do, in words")
    add_model_options(chat)
    chat.add_argument(
        "--provider",
        choices=("openai", "anthropic"),
        default=None,
        help="the API the model speaks (default: anthropic for claude-* models, else openai; "
        "Gemini, Ollama and vLLM speak openai at their compatible endpoint)",
    )
    chat.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="the variable holding the API key (default: OPENAI_API_KEY, or ANTHROPIC_API_KEY)",
    )
    chat.add_argument("--temperature", type=float, default=None)
    chat.add_argument(
        "--backend",
        default=DEFAULT_BACKEND,
        help=f"where the code runs: {', '.join(backend_names())} (default: {DEFAULT_BACKEND})",
    )
    chat.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="seconds per block (default: 60)"
    )
    chat.add_argument(
        "--workdir",
        default=None,
        metavar="DIR",
        help="workspace directory (default: a temporary one, kept when files are left in it, else removed)",
    )
    add_limit_options(chat)
    chat.add_argument(
        "-p",
        "--package",
        action="append",
        default=[],
        metavar="PKG",
        help="run the code in a virtual environment with this package (repeatable)",
    )
    chat.add_argument(
        "--auto", action="store_true", help="run every block without asking (human_input_mode NEVER)"
    )
    chat.add_argument(
        "--max-turns",
        type=int,
        default=None,
        metavar="N",
        help="the most model messages (with --tools: rounds of tool calls, default 10)",
    )
    chat.add_argument(
        "--tools",
        action="store_true",
        help="function calling: the model calls the python, shell and file tools instead of "
        "writing fenced blocks",
    )
    chat.set_defaults(handler=run_chat)


def add_model_options(cmd: argparse.ArgumentParser) -> None:
    """``--model`` and ``--base-url``, as every command that talks to a model takes them."""
    cmd.add_argument(
        "--model",
        default=os.environ.get("EXECBOX_MODEL", DEFAULT_MODEL),
        help=f"the model's name (default: $EXECBOX_MODEL or {DEFAULT_MODEL})",
    )
    cmd.add_argument(
        "--base-url",
        default=None,
        metavar="URL",
        help="an OpenAI-compatible server (default: $OPENAI_BASE_URL or OpenAI), "
        "e.g. http://localhost:11434/v1 for Ollama",
    )


def run_chat(args: argparse.Namespace) -> int:
    from ..agents import Conversation, WriterAgent, format_chat_result, model_client
    from ..agents._providers import provider_of

    provider = provider_of(args.model, args.provider)
    key_env = args.api_key_env or ("ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY")
    model = model_client(
        args.model,
        provider=provider,
        base_url=args.base_url,
        api_key_env=key_env,
        temperature=args.temperature,
    )
    options: dict[str, Any] = {"limits": limits_from(args, timeout_s=args.timeout)}
    if args.package:
        from ..environments import Venv
        from ._progress import progress_printer

        options["environment"] = Venv(packages=args.package)
        options["on_progress"] = progress_printer()
    with (
        cli_workspace(args.workdir) as workdir,
        create_executor(args.backend, workspace=workdir, **options) as executor,
    ):
        if args.tools:
            from ._chat_tools import run_tool_chat

            print(
                f"execbox chat --tools: {args.model} at {model.where}, tools run on {args.backend} "
                f"in {executor.workspace.path}",
                file=sys.stderr,
            )
            return run_tool_chat(args, model, executor)
        writer = WriterAgent(
            model,
            languages=_languages(executor.capabilities.languages),
            stateful=executor.capabilities.stateful,
        )
        chat = Conversation(
            writer,
            executor,
            human_input_mode="NEVER" if args.auto else "ALWAYS",
            human_input=ask_person,
            on_message=_show,
        )
        print(
            f"execbox chat: {args.model} at {model.where}, code runs on {args.backend} "
            f"in {executor.workspace.path}",
            file=sys.stderr,
        )
        result = chat.initiate_chat(args.task, max_turns=args.max_turns)
    print("\n" + format_chat_result(result))
    return 0 if result.stop_reason.startswith("the writer said") else 1


def _languages(available: tuple[str, ...]) -> list[str]:
    preferred = [name for name in ("python", "bash", "sh") if name in available]
    return preferred + [name for name in available if name not in preferred]


def _show(message) -> None:
    from ..agents._conversation import format_message

    print(format_message(message), flush=True)


def ask_person(prompt: str) -> str:
    print(file=sys.stderr)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")
