"""Explore a paper with two agents: a model that plans and writes code, and
the paper's executor that runs it (understand → experiment → analyse), with
a person guiding between steps or not at all."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from ..agents import (
    ChatResult,
    CodeExecutorAgent,
    Conversation,
    ModelClient,
    TextMessage,
    WriterAgent,
    format_chat_result,
    writer_system_message,
)
from ..agents._conversation import format_message
from ._options import EXPLORE_HINTS, refusing

# A PaperExecutor; named so because this module is what PaperExecutor.explore()
# calls, so it cannot import it back.
PaperExecutor = Any

__all__ = ["DEFAULT_GOAL", "create_agents", "explore", "explorer_system_message"]

DEFAULT_MODEL = "gpt-4o-mini"

DEFAULT_GOAL = """Explore this paper's code in three phases.
1. Understand: list the repository, read its README and the main entry points, and say in a few
   sentences what the paper does and how the code is organised.
2. Experiment: run the smallest meaningful example (a demo, a test, a tiny training or inference
   run) and show what it prints; fix what fails.
3. Analyse: explain the results and how they relate to the paper's claims; suggest one next
   experiment.
Keep each step small and print what you learn."""


def explorer_system_message(
    executor: PaperExecutor, goal: str = DEFAULT_GOAL, system_message: str | None = None
) -> str:
    """The writer's instructions: how execbox runs code, the paper, the goal,
    and the caller's extra text."""
    network = "has network access" if executor.limits.network else "has no network access"
    parts = [
        writer_system_message(["bash", "python"]),
        "You are exploring a research paper's code inside its ready-made Docker environment.",
        executor.paper_context(),
        (
            f"Your code runs in /workspace (files there persist between steps). The paper's code is in "
            f"{executor.working_directory} and is read-only: cd there to read and run it, and copy it "
            f"(cp -r {executor.working_directory} repo) before changing anything. The environment {network}; "
            f"each block may run for {executor.limits.timeout_s:g} s."
        ),
        "Goal:\n" + goal.strip(),
    ]
    if system_message:
        parts.append(system_message.strip())
    return "\n\n".join(parts)


@refusing(EXPLORE_HINTS)
def create_agents(
    executor: PaperExecutor,
    *,
    goal: str = DEFAULT_GOAL,
    model: ModelClient | str | None = None,
    system_message: str | None = None,
) -> tuple[CodeExecutorAgent, WriterAgent]:
    """The two agents of an exploration: the executor side (runs code, no
    model) and the writer (the model, with the paper's system message)."""
    client = model if isinstance(model, ModelClient) else ModelClient(model or DEFAULT_MODEL)
    runner = CodeExecutorAgent("code_executor", executor, system_message=None)
    writer = WriterAgent(
        client,
        name="research_explorer",
        system_message=explorer_system_message(executor, goal, system_message),
    )
    return runner, writer


@refusing(EXPLORE_HINTS)
def explore(
    executor: PaperExecutor,
    *,
    goal: str = DEFAULT_GOAL,
    interactive: bool = True,
    model: ModelClient | str | None = None,
    max_turns: int | None = None,
    verbose: bool = True,
    system_message: str | None = None,
    human_input: Callable[[str], str] | None = None,
    printer: Callable[[str], None] = print,
) -> ChatResult:
    """Run an exploration session and return its ``ChatResult``.

    ``interactive``: a person is asked before each step (Enter goes on, text
    guides, ``exit`` ends); else it runs until TERMINATE or ``max_turns``.
    ``verbose``: print a header, each message, and a summary (messages, cost,
    final status)."""
    runner, writer = create_agents(executor, goal=goal, model=model, system_message=system_message)
    mode: Literal["ALWAYS", "NEVER"] = "ALWAYS" if interactive else "NEVER"
    on_message = _printer(printer) if verbose else None
    chat = Conversation(
        writer,
        runner,
        human_input_mode=mode,
        human_input=human_input,
        on_message=on_message,
        user_name="user",
    )
    executor.start()  # the catalog lookup and the image, before anyone is asked anything
    if verbose:
        asset = executor.asset
        printer("=" * 72)
        printer(f"Exploring {asset.arxiv_id + ': ' + asset.title if asset else executor.image_override}")
        printer(
            f"Model {writer.model.model} at {writer.model.where}; code runs in {executor.environment.image}"
        )
        printer(
            "Interactive: Enter goes on, text guides the model, exit ends."
            if interactive
            else "Automatic: runs until the model says TERMINATE"
            + (f" or {max_turns} turns." if max_turns else ".")
        )
        printer("=" * 72)
    first = (
        f"Let's explore this paper. Start with the directory structure of {executor.working_directory} "
        "and its README."
    )
    result = chat.initiate_chat(first, max_turns=max_turns)
    if verbose:
        printer("=" * 72)
        printer("Session summary")
        printer(format_chat_result(result))
        printer("=" * 72)
    return result


def _printer(printer: Callable[[str], None]) -> Callable[[TextMessage], None]:
    def show(message: TextMessage) -> None:
        printer(format_message(message))

    return show
