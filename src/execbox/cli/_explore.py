"""``execbox explore ARXIV_ID``: a model explores a paper's code in its
Docker environment (understand → experiment → analyse), you guiding or not."""

from __future__ import annotations

import argparse

from ._chat import add_model_options, ask_person
from ._papers import add_catalog_options

__all__ = ["register"]


def register(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser(
        "explore", help="explore a research paper's code with a model, in its Docker image"
    )
    cmd.add_argument("arxiv_id", metavar="ARXIV_ID", help="the paper, e.g. 2010.11929v2")
    cmd.add_argument("--goal", default=None, help="what to find out (default: a three-phase plan)")
    cmd.add_argument("--auto", action="store_true", help="run without asking between steps")
    cmd.add_argument("--max-turns", type=int, default=None, metavar="N", help="the most model messages")
    add_model_options(cmd)
    cmd.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="VAR",
        help="the variable holding the model's API key (default: OPENAI_API_KEY)",
    )
    add_catalog_options(cmd)
    cmd.add_argument("--image", default=None, help="run in this image instead of the paper's")
    cmd.add_argument(
        "--build",
        action="store_true",
        help="build the paper's image from the catalog's Dockerfile when it is not here",
    )
    cmd.add_argument(
        "--timeout", type=float, default=300.0, metavar="S", help="seconds per block (default: 300)"
    )
    cmd.add_argument("--network", action="store_true", help="let the paper's code use the network")
    cmd.add_argument("--quiet", action="store_true", help="print only the summary")
    cmd.set_defaults(handler=run_explore)


def run_explore(args: argparse.Namespace) -> int:
    from .._models import Limits
    from ..agents import ModelClient
    from ..papers import PaperExecutor, default_catalog

    catalog = default_catalog(args.catalog, offline=args.offline)
    model = ModelClient(args.model, base_url=args.base_url, api_key_env=args.api_key_env)
    limits = Limits(timeout_s=args.timeout, network=True if args.network else None)
    with PaperExecutor(
        args.arxiv_id,
        image=args.image,
        catalog=catalog,
        limits=limits,
        build_missing=True if args.build else None,
    ) as paper:
        result = paper.explore(
            args.goal,
            interactive=not args.auto,
            model=model,
            max_turns=args.max_turns,
            verbose=not args.quiet,
            human_input=ask_person,
        )
    if args.quiet:
        from ..agents import format_chat_result

        print(format_chat_result(result))
    return 0 if result.stop_reason.startswith("the writer said") else 1
