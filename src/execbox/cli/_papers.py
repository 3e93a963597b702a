"""``execbox papers search`` and ``execbox papers show``: find research papers
(and their ready-made Docker environments) in the Remyx catalog and in local
catalog files."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..papers import Catalog, PaperAsset

__all__ = ["add_catalog_options", "register"]


def register(commands: argparse._SubParsersAction) -> None:
    papers = commands.add_parser(
        "papers",
        help="find research papers and their Docker environments (Remyx catalog, local files)",
        description="Look papers up in the Remyx API (REMYXAI_API_KEY, REMYXAI_API_URL) and in local "
        "catalog files (TOML [[papers]] tables or JSON). Files given with --catalog are asked first.",
    )
    verbs = papers.add_subparsers(dest="verb", metavar="VERB", required=True)

    search = verbs.add_parser(
        "search",
        help="papers matching some words",
        description="Papers whose title, abstract, id, ... match the words, best first.",
    )
    search.add_argument("query", nargs="+", metavar="QUERY", help="the words to look for")
    search.add_argument("--docker", action="store_true", help="only papers with a Docker image")
    search.add_argument(
        "-n",
        "--max-results",
        type=int,
        default=10,
        metavar="N",
        help="at most N papers (default 10; the Remyx API gives at most 50)",
    )
    search.add_argument(
        "--category",
        action="append",
        default=[],
        metavar="CAT",
        help="only papers in this arXiv category, e.g. cs.CV (repeatable: any of them)",
    )
    search.add_argument("--llm", action="store_true", help="let the Remyx API rank with a language model")
    _common(search)
    search.set_defaults(handler=run_search)

    show = verbs.add_parser(
        "show",
        help="everything known about one paper",
        description="Print one paper's metadata and its Docker environment.",
    )
    show.add_argument("arxiv_id", metavar="ID", help="the arXiv id, e.g. 2010.11929v2")
    _common(show)
    show.set_defaults(handler=run_show)


def _common(parser: argparse.ArgumentParser) -> None:
    add_catalog_options(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def add_catalog_options(parser: argparse.ArgumentParser) -> None:
    """``--catalog`` and ``--offline``, for ``default_catalog(args.catalog, offline=args.offline)``."""
    parser.add_argument(
        "--catalog",
        action="append",
        default=[],
        metavar="FILE",
        help="a local catalog file (.toml or .json), asked before the Remyx API (repeatable)",
    )
    parser.add_argument(
        "--offline", action="store_true", help="do not ask the Remyx API: only the --catalog files"
    )


def _catalog(args: argparse.Namespace) -> Catalog:
    from ..papers import default_catalog

    return default_catalog(args.catalog, offline=args.offline)


def run_search(args: argparse.Namespace) -> int:
    query = " ".join(args.query)
    found = _catalog(args).search(
        query,
        max_results=args.max_results,
        has_docker=True if args.docker else None,
        categories=args.category or None,
        use_llm=args.llm,
    )
    if args.json:
        print(json.dumps([paper.to_dict() for paper in found], indent=2))
        return 0
    if not found:
        hint = " with a Docker image" if args.docker else ""
        print(f"no papers{hint} match {query!r}: try fewer or other words")
        return 0
    print(_table(found))
    return 0


def _table(papers: list[PaperAsset]) -> str:
    id_width = max(len("ARXIV ID"), *(len(p.arxiv_id) for p in papers))
    head = f"{'ARXIV ID':<{id_width}}  DOCKER  {'PUBLISHED':<10}  "
    title_width = max(20, shutil.get_terminal_size((100, 24)).columns - len(head))
    lines = [head + "TITLE"]
    for paper in papers:
        title = " ".join(paper.title.split()) or "(no title)"
        if len(title) > title_width:
            title = title[: title_width - 3] + "..."
        docker = "yes" if paper.has_docker else "no"
        published = (paper.published_at or "")[:10]
        lines.append(f"{paper.arxiv_id:<{id_width}}  {docker:<6}  {published:<10}  {title}")
    return "\n".join(lines)


def run_show(args: argparse.Namespace) -> int:
    paper = _catalog(args).get(args.arxiv_id)
    if args.json:
        print(json.dumps(paper.to_dict(), indent=2))
        return 0
    print(_describe(paper))
    return 0


def _describe(paper: PaperAsset) -> str:
    width = min(100, shutil.get_terminal_size((100, 24)).columns)
    rows: list[tuple[str, str]] = [
        ("authors", ", ".join(paper.authors) or "-"),
        ("categories", ", ".join(paper.categories) or "-"),
        ("published", paper.published_at or "-"),
        ("paper", paper.url or f"https://arxiv.org/abs/{paper.arxiv_id}"),
        ("GitHub", paper.github_url or "-"),
    ]
    image = paper.docker_image or ("(not named)" if paper.has_docker else "none")
    status = f" (build: {paper.docker_build_status})" if paper.docker_build_status else ""
    rows.append(("Docker image", image + status))
    rows.append(("working dir", paper.working_directory))
    needed = [
        f"{name} ({'set' if os.environ.get(name) else 'not set here'})" for name in paper.environment_vars
    ]
    rows.append(("env vars needed", ", ".join(needed) or "none"))
    if paper.dockerfile_text:
        dockerfile = f"yes, inline ({len(paper.dockerfile_text.splitlines())} lines)"
    elif paper.dockerfile_s3_uri:
        dockerfile = f"yes, at {paper.dockerfile_s3_uri}"
    else:
        dockerfile = "no"
    rows.append(("Dockerfile", dockerfile))
    label = max(len(name) for name, _ in rows) + 2
    lines = [f"{paper.arxiv_id}  {paper.title or '(no title)'}", ""]
    lines += [f"{name + ':':<{label}}{value}" for name, value in rows]
    for name, text in (
        ("quickstart", paper.quickstart_hint),
        ("reasoning", paper.reasoning),
        ("abstract", paper.abstract),
    ):
        if text:
            lines += ["", f"{name}:", textwrap.indent(_wrap(text, width - 2), "  ")]
    return "\n".join(lines)


def _wrap(text: str, width: int) -> str:
    """Paragraphs refilled; lines that look like commands kept as they are."""
    out = []
    for block in text.strip().split("\n\n"):
        if any(line.startswith(("  ", "\t", "$", "docker ", "python ")) for line in block.splitlines()):
            out.append(block)
        else:
            out.append(textwrap.fill(" ".join(block.split()), width))
    return "\n\n".join(out)
