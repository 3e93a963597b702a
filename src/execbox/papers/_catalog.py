"""The catalog interface: where papers (``PaperAsset``) are looked up.

A ``Catalog`` answers four questions: one paper by arXiv id (``get``), papers
matching words (``search``), a page of papers (``list``) and counts
(``stats``). ``RemyxCatalog`` asks the Remyx API, ``LocalCatalog`` reads a
file; ``ChainedCatalog`` (or ``local | remote``) asks several in order.

Errors: every failure is a ``CatalogError``; an id a catalog does not have is
its subclass ``PaperNotFoundError``.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Iterable, Sequence
from typing import Any

from .._errors import CatalogError, ConfigurationError, PaperNotFoundError
from ._asset import PaperAsset

__all__ = ["Catalog", "ChainedCatalog"]


class Catalog(abc.ABC):
    """Somewhere papers can be looked up. Subclasses implement the four
    methods; argument checks shared by all of them live here."""

    #: How the catalog is named in messages ("the Remyx API at ...").
    description: str = "a catalog"

    @abc.abstractmethod
    def get(self, arxiv_id: str) -> PaperAsset:
        """The paper with this arXiv id; ``PaperNotFoundError`` if absent."""

    @abc.abstractmethod
    def search(
        self,
        query: str,
        *,
        max_results: int = 10,
        has_docker: bool | None = None,
        categories: Sequence[str] | None = None,
        use_llm: bool = False,
    ) -> list[PaperAsset]:
        """Papers matching ``query``, best first, at most ``max_results``.
        ``has_docker=True`` keeps papers with a Docker image; ``categories``
        keeps papers in any of them; ``use_llm`` lets a remote catalog rank
        with a language model (local catalogs ignore it)."""

    @abc.abstractmethod
    def list(
        self, *, limit: int = 20, offset: int = 0, has_docker: bool | None = None, category: str | None = None
    ) -> builtins.list[PaperAsset]:
        """A page of papers: ``limit`` of them after skipping ``offset``."""

    @abc.abstractmethod
    def stats(self) -> dict[str, Any]:
        """Counts about the catalog (what is in it depends on the catalog)."""

    def __or__(self, other: Catalog) -> ChainedCatalog:
        if not isinstance(other, Catalog):
            return NotImplemented
        return ChainedCatalog(self, other)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.description}>"


def check_arxiv_id(arxiv_id: str) -> str:
    if not isinstance(arxiv_id, str) or not arxiv_id.strip():
        raise ConfigurationError(
            f"an arXiv id must be a non-empty string (like '2010.11929v2'): got {arxiv_id!r}"
        )
    return arxiv_id.strip()


def check_search(
    query: str, max_results: int, categories: Sequence[str] | None
) -> tuple[str, tuple[str, ...]]:
    """The stripped query and the categories as a tuple, or a
    ``ConfigurationError`` naming the argument to change."""
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(f"search needs some words to look for (query): got {query!r}")
    if isinstance(max_results, bool) or not isinstance(max_results, int) or max_results < 1:
        raise ConfigurationError(f"max_results must be a positive integer: got {max_results!r}")
    if isinstance(categories, str):
        categories = [categories]
    return query.strip(), tuple(categories or ())


def check_page(limit: int, offset: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ConfigurationError(f"limit must be a positive integer: got {limit!r}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ConfigurationError(f"offset must be a non-negative integer: got {offset!r}")


def unique(papers: Iterable[PaperAsset]) -> builtins.list[PaperAsset]:
    """``papers`` without repeated arXiv ids; the first one seen wins."""
    seen: set[str] = set()
    kept = []
    for paper in papers:
        if paper.arxiv_id not in seen:
            seen.add(paper.arxiv_id)
            kept.append(paper)
    return kept


class ChainedCatalog(Catalog):
    """Several catalogs asked in order (``ChainedCatalog(local, remote)`` or
    ``local | remote``).

    - ``get``: the first catalog that has the paper. A catalog that fails in
      another way (unreachable, refused key, bad file) does not stop the
      chain: the next one is asked. If none has the paper, the error is a
      ``PaperNotFoundError`` when every catalog said "not here", else a
      ``CatalogError`` listing each catalog's reason (the paper may exist
      in the one that failed).
    - ``search`` / ``list``: the results of every catalog, in chain order,
      without repeated arXiv ids (the earlier catalog's entry wins). A failing
      catalog makes the whole call fail: silently partial results would look
      complete. Leave the failing catalog out (``--offline``) to search the
      others.
    - ``stats``: ``{"catalogs": [{"catalog": description, ...its stats}]}``.
    """

    def __init__(self, *catalogs: Catalog) -> None:
        flat: builtins.list[Catalog] = []
        for catalog in catalogs:
            if not isinstance(catalog, Catalog):
                raise ConfigurationError(f"ChainedCatalog takes Catalog objects: got {catalog!r}")
            flat.extend(catalog.catalogs if isinstance(catalog, ChainedCatalog) else [catalog])
        if not flat:
            raise ConfigurationError(
                "ChainedCatalog needs at least one catalog: pass LocalCatalog(path) and/or RemyxCatalog()"
            )
        self.catalogs: tuple[Catalog, ...] = tuple(flat)
        self.description = " then ".join(c.description for c in self.catalogs)

    def get(self, arxiv_id: str) -> PaperAsset:
        arxiv_id = check_arxiv_id(arxiv_id)
        absent: builtins.list[str] = []
        failures: builtins.list[str] = []
        for catalog in self.catalogs:
            try:
                return catalog.get(arxiv_id)
            except PaperNotFoundError:
                absent.append(catalog.description)
            except CatalogError as exc:
                failures.append(str(exc))
        if not failures:
            raise PaperNotFoundError(arxiv_id, self.description)
        reasons = "; ".join(failures)
        if absent:
            raise CatalogError(
                f"paper {arxiv_id!r} is not in {', '.join(absent)}, and the other "
                f"catalog{'s' if len(failures) > 1 else ''} failed: {reasons}"
            )
        raise CatalogError(f"cannot look paper {arxiv_id!r} up: {reasons}")

    def search(
        self,
        query: str,
        *,
        max_results: int = 10,
        has_docker: bool | None = None,
        categories: Sequence[str] | None = None,
        use_llm: bool = False,
    ) -> builtins.list[PaperAsset]:
        query, cats = check_search(query, max_results, categories)
        found: builtins.list[PaperAsset] = []
        for catalog in self.catalogs:
            found.extend(
                catalog.search(
                    query,
                    max_results=max_results,
                    has_docker=has_docker,
                    categories=cats or None,
                    use_llm=use_llm,
                )
            )
        return unique(found)[:max_results]

    def list(
        self, *, limit: int = 20, offset: int = 0, has_docker: bool | None = None, category: str | None = None
    ) -> builtins.list[PaperAsset]:
        check_page(limit, offset)
        # Offsets count over the merged list, so each catalog gives its first
        # offset + limit papers and the page is cut after deduplication.
        found: builtins.list[PaperAsset] = []
        for catalog in self.catalogs:
            found.extend(
                catalog.list(limit=offset + limit, offset=0, has_docker=has_docker, category=category)
            )
        return unique(found)[offset : offset + limit]

    def stats(self) -> dict[str, Any]:
        return {"catalogs": [{"catalog": c.description, **c.stats()} for c in self.catalogs]}
