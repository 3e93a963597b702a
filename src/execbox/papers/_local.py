"""``LocalCatalog``: papers listed in a TOML or JSON file.

TOML: one ``[[papers]]`` table per paper. JSON: ``{"papers": [...]}`` or a
bare list. The fields are those of a Remyx asset (``PaperAsset``); only
``arxiv_id`` is required::

    [[papers]]
    arxiv_id = "2010.11929v2"
    title = "An Image is Worth 16x16 Words"
    docker_image = "remyxai/2010.11929v2:latest"
    environment_vars = ["HF_TOKEN"]
"""

from __future__ import annotations

import builtins
import json
import os
import tomllib
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._errors import CatalogError, ConfigurationError, PaperNotFoundError
from ._asset import PaperAsset
from ._catalog import Catalog, check_arxiv_id, check_page, check_search

__all__ = ["LocalCatalog"]

_SEARCHED = ("arxiv_id", "title", "abstract")
_SEARCHED_LISTS = ("categories", "authors")


class LocalCatalog(Catalog):
    """The papers of one ``.toml`` or ``.json`` file, read on first use (and
    kept). A missing or malformed file raises ``CatalogError`` naming the
    file and the problem.

    ``search`` keeps papers whose arXiv id, title, abstract, categories or
    authors contain every word of the query (ignoring case), most hits
    first, file order among equals. ``use_llm`` is ignored.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.description = f"catalog file {self.path}"
        self._papers: tuple[PaperAsset, ...] | None = None

    def __repr__(self) -> str:
        return f"LocalCatalog({str(self.path)!r})"

    @property
    def papers(self) -> tuple[PaperAsset, ...]:
        """Every paper of the file, in file order."""
        if self._papers is None:
            self._papers = _load(self.path)
        return self._papers

    def get(self, arxiv_id: str) -> PaperAsset:
        arxiv_id = check_arxiv_id(arxiv_id)
        for paper in self.papers:
            if paper.arxiv_id == arxiv_id:
                return paper
        raise PaperNotFoundError(arxiv_id, self.description)

    def search(
        self,
        query: str,
        *,
        max_results: int = 10,
        has_docker: bool | None = None,
        categories: Sequence[str] | None = None,
        use_llm: bool = False,
    ) -> list[PaperAsset]:
        query, cats = check_search(query, max_results, categories)
        words = query.lower().split()
        wanted = {c.lower() for c in cats}
        scored: builtins.list[tuple[int, int, PaperAsset]] = []
        for index, paper in enumerate(self.papers):
            if not _kept(paper, has_docker, wanted):
                continue
            text = _text(paper)
            hits = [text.count(word) for word in words]
            if all(hits):
                scored.append((-sum(hits), index, paper))
        scored.sort(key=lambda item: item[:2])
        return [paper for _, _, paper in scored[:max_results]]

    def list(
        self, *, limit: int = 20, offset: int = 0, has_docker: bool | None = None, category: str | None = None
    ) -> builtins.list[PaperAsset]:
        check_page(limit, offset)
        wanted = {category.lower()} if category else set()
        kept = [p for p in self.papers if _kept(p, has_docker, wanted)]
        return kept[offset : offset + limit]

    def stats(self) -> dict[str, Any]:
        categories = Counter(c for p in self.papers for c in p.categories)
        return {
            "total": len(self.papers),
            "with_docker": sum(1 for p in self.papers if p.has_docker),
            "categories": dict(sorted(categories.items())),
        }


def _kept(paper: PaperAsset, has_docker: bool | None, categories: set[str]) -> bool:
    if has_docker is not None and paper.has_docker != has_docker:
        return False
    return not categories or any(c.lower() in categories for c in paper.categories)


def _text(paper: PaperAsset) -> str:
    parts = [getattr(paper, name) or "" for name in _SEARCHED]
    parts += [" ".join(getattr(paper, name)) for name in _SEARCHED_LISTS]
    return "\n".join(parts).lower()


def _load(path: Path) -> tuple[PaperAsset, ...]:
    where = f"catalog file {path}"
    suffix = path.suffix.lower()
    if suffix not in (".toml", ".json"):
        raise CatalogError(f"{where}: unknown format {suffix or '(no suffix)'!r}: name it .toml or .json")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogError(
            f"{where} does not exist: check the path (--catalog FILE, LocalCatalog(path))"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{where} cannot be read: {exc}") from None
    if suffix == ".toml":
        try:
            data: Any = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CatalogError(f"{where} is not valid TOML: {exc}") from None
        entries = data.get("papers")
        if not isinstance(entries, builtins.list):
            raise CatalogError(f"{where} has no [[papers]] tables: write one [[papers]] table per paper")
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CatalogError(
                f"{where} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
            ) from None
        entries = data.get("papers") if isinstance(data, dict) else data
        if not isinstance(entries, builtins.list):
            raise CatalogError(f'{where} must hold a list of papers or {{"papers": [...]}}')
    papers: builtins.list[PaperAsset] = []
    first_seen: dict[str, int] = {}
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            raise CatalogError(f"{where}: paper #{number} is not a table/object: got {entry!r}")
        if not entry.get("arxiv_id"):
            title = f" ({entry['title']!r})" if entry.get("title") else ""
            raise CatalogError(f'{where}: paper #{number}{title} has no arxiv_id: add arxiv_id = "..."')
        if not isinstance(entry["arxiv_id"], str):
            raise CatalogError(
                f"{where}: paper #{number} has arxiv_id {entry['arxiv_id']!r}: "
                'write it as a string ("2010.11929v2")'
            )
        try:
            paper = PaperAsset.from_dict(entry)
        except (ConfigurationError, TypeError, AttributeError) as exc:
            raise CatalogError(
                f"{where}: paper #{number} ({entry['arxiv_id']!r}) is malformed: {exc}"
            ) from None
        if paper.arxiv_id in first_seen:
            raise CatalogError(
                f"{where}: arxiv_id {paper.arxiv_id!r} appears twice (papers "
                f"#{first_seen[paper.arxiv_id]} and #{number}): keep one"
            )
        first_seen[paper.arxiv_id] = number
        papers.append(paper)
    return tuple(papers)
