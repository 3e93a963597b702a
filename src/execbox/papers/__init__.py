"""Research papers and their ready-made environments.

A catalog finds papers by arXiv id or by words: ``RemyxCatalog`` asks the
Remyx API (key: ``REMYXAI_API_KEY`` or ``api_key=``), ``LocalCatalog`` reads
a TOML or JSON file, and ``ChainedCatalog`` (or ``local | remote``) asks
several in order. Each paper is a ``PaperAsset``: its metadata and, when it
has one, its Docker image, working directory and needed environment
variables::

    from execbox.papers import default_catalog

    catalog = default_catalog(["my-papers.toml"])
    for paper in catalog.search("vision transformer", has_docker=True):
        print(paper.arxiv_id, paper.docker_image)

``PaperExecutor(arxiv_id)`` runs code in the paper's image on the docker
backend; ``paper.explore()`` lets a model work through the paper's code.

From the shell: ``execbox papers search WORDS``, ``execbox papers show ID``
and ``execbox explore ID``.
"""

from __future__ import annotations

from .._errors import CatalogError, PaperNotFoundError
from ._asset import PaperAsset
from ._catalog import Catalog, ChainedCatalog
from ._default import default_catalog
from ._executor import PAPER_POLICIES, PaperExecutor
from ._explore import DEFAULT_GOAL, create_agents, explore, explorer_system_message
from ._local import LocalCatalog
from ._remyx import RemyxCatalog

__all__ = [
    "DEFAULT_GOAL",
    "PAPER_POLICIES",
    "Catalog",
    "CatalogError",
    "ChainedCatalog",
    "LocalCatalog",
    "PaperAsset",
    "PaperExecutor",
    "PaperNotFoundError",
    "RemyxCatalog",
    "create_agents",
    "default_catalog",
    "explore",
    "explorer_system_message",
]
