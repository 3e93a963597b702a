"""Run code in a research paper's ready-made Docker environment.

    with PaperExecutor("2010.11929v2") as paper:         # the Remyx catalog
        print(paper.paper_context())
        result = paper.run(CodeBlock("bash", "ls /app && cat /app/README.md"))

The paper is looked up in a catalog (``default_catalog()``: Remyx; or a
``LocalCatalog``) when the executor starts, not when it is made. Its image
runs on the docker backend with execbox's hardening (no network unless
``Limits(network=True)``, read-only root, non-root user): the paper's code in
its ``working_directory`` (``/app``) can be read and run; to change it, copy it
into the workspace first (``cp -r /app repo``). Blocks start in the workspace
(``/workspace``), whose files persist and are reported.
"""

from __future__ import annotations

import inspect
import os
import sys
import tempfile
import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._languages import Policy
from .._models import Limits
from ..backends.docker import DockerExecutor
from ..environments import DockerPython
from ._asset import PaperAsset
from ._options import EXPLORE_HINTS, check_paper_options, refusing

__all__ = ["PAPER_POLICIES", "PaperExecutor"]

# where execbox's own files are (a warning points past them)
_PACKAGE = str(Path(__file__).parents[1]) + os.sep
# the keyword options the docker backend takes, which PaperExecutor hands on
_DOCKER_TAKES = frozenset(
    p.name for p in inspect.signature(DockerExecutor.__init__).parameters.values() if p.kind is p.KEYWORD_ONLY
)

# What runs in a paper's environment: Python and shells; web languages are
# saved to the workspace, not run.
PAPER_POLICIES: dict[str, Policy] = {
    "python": "execute",
    "bash": "execute",
    "sh": "execute",
    "pwsh": "execute",
    "javascript": "save",
    "html": "save",
    "css": "save",
}


class PaperExecutor(DockerExecutor):
    """A ``DockerExecutor`` on a paper's image.

    - ``arxiv_id``: the paper to look up in ``catalog`` (default: Remyx,
      ``REMYXAI_API_KEY``); ``image``: use this image instead (with an
      ``arxiv_id`` the metadata still comes from the catalog).
    - ``timeout``: seconds per block (default 300), or ``limits=``.
    - The paper's ``environment_vars`` are passed from this machine; each
      one missing here is named in a warning.
    - ``build_missing``: when the image is not here but the catalog has its
      Dockerfile: True builds it, False refuses, None asks ``confirm``
      (default: a yes/no question on a terminal, else no).
    - Other keyword options are the docker backend's (``runtime``,
      ``volumes``, ``gpus``, ``device_requests``, ``env``, ...).
    """

    def __init__(
        self,
        arxiv_id: str | None = None,
        *,
        image: str | None = None,
        catalog: Any = None,
        timeout: float = 300,
        limits: Limits | None = None,
        build_missing: bool | None = None,
        confirm: Callable[[str], bool] | None = None,
        execution_policies: Mapping[str, Any] | None = None,
        **docker_options: Any,
    ) -> None:
        if arxiv_id is None and image is None:
            raise ConfigurationError("PaperExecutor needs arxiv_id= (a paper in the catalog) or image=")
        if "environment" in docker_options:
            raise ConfigurationError("PaperExecutor takes the paper's image: give image=, not environment=")
        check_paper_options(docker_options, _DOCKER_TAKES)
        if limits is None:
            limits = Limits(timeout_s=timeout)
        super().__init__(
            image=image,
            limits=limits,
            execution_policies={**PAPER_POLICIES, **(execution_policies or {})},
            **docker_options,
        )
        self.arxiv_id = arxiv_id
        self.image_override = image
        self._catalog = catalog
        self._asset: PaperAsset | None = None
        self.build_missing = build_missing
        self._confirm = confirm or _ask_on_terminal

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from ._default import default_catalog

            self._catalog = default_catalog()
        return self._catalog

    @property
    def asset(self) -> PaperAsset | None:
        """The paper's catalog entry (looked up once; None with image= alone)."""
        if self._asset is None and self.arxiv_id is not None:
            self._asset = self.catalog.get(self.arxiv_id)
        return self._asset

    def paper_context(self) -> str:
        """What an agent should know about the paper, as text."""
        asset = self.asset
        if asset is None:
            return (
                f"Environment: the Docker image {self.image_override}; no paper metadata "
                "(give arxiv_id= for it)."
            )
        lines = [
            f"Paper: {asset.title or '(untitled)'}",
            f"arXiv id: {asset.arxiv_id}",
            f"GitHub: {asset.github_url or 'not given'}",
            f"Working directory (the paper's code, read-only): {asset.working_directory}",
        ]
        if asset.environment_vars:
            lines.append("Environment variables it uses: " + ", ".join(asset.environment_vars))
        if asset.reasoning:
            lines += ["", "About the environment:", asset.reasoning.strip()]
        if asset.quickstart_hint:
            lines += ["", "Quickstart:", asset.quickstart_hint.strip()]
        return "\n".join(lines)

    @property
    def working_directory(self) -> str:
        return self.asset.working_directory if self.asset is not None else "/app"

    @refusing(EXPLORE_HINTS)
    def explore(
        self,
        goal: str | None = None,
        *,
        interactive: bool = True,
        model: Any = None,
        max_turns: int | None = None,
        verbose: bool = True,
        system_message: str | None = None,
        human_input: Callable[[str], str] | None = None,
    ) -> Any:
        """A two-agent session exploring the paper (see ``execbox.papers.explore``);
        returns the ``ChatResult``."""
        from ._explore import DEFAULT_GOAL, explore

        return explore(
            self,
            goal=goal or DEFAULT_GOAL,
            interactive=interactive,
            model=model,
            max_turns=max_turns,
            verbose=verbose,
            system_message=system_message,
            human_input=human_input,
        )

    @refusing(EXPLORE_HINTS)
    def create_agents(
        self, goal: str | None = None, *, model: Any = None, system_message: str | None = None
    ) -> Any:
        """The (executor agent, writer agent) pair of an exploration, to run
        your own ``Conversation``."""
        from ._explore import DEFAULT_GOAL, create_agents

        return create_agents(self, goal=goal or DEFAULT_GOAL, model=model, system_message=system_message)

    def to_config(self) -> dict[str, Any]:
        raise ConfigurationError(
            "a PaperExecutor is not saved as an executor config (its catalog is not data): keep the arxiv_id "
            "(and catalog file) and make it again, or save a DockerExecutor(image=...) of its image"
        )

    # -- lifecycle ----------------------------------------------------------------

    def _start(self) -> None:
        image = self._resolve_image()
        self._environment = DockerPython(image)
        asset = self.asset
        if asset is not None:
            passed = {}
            for name in asset.environment_vars:
                if name in os.environ:
                    passed[name] = os.environ[name]
                else:
                    warnings.warn(
                        f"paper {asset.arxiv_id} uses {name}, which is not set on this machine: "
                        f"set {name} before starting if its code needs it",
                        UserWarning,
                        stacklevel=_callers_level(),
                    )
            self.env = {**passed, **self.env}
        super()._start()

    def _resolve_image(self) -> str:
        if self.image_override is not None:
            return self.image_override
        asset = self.asset
        assert asset is not None
        if not asset.docker_image and not asset.dockerfile_text:
            raise ConfigurationError(
                f"paper {asset.arxiv_id} has no Docker environment in the catalog: find papers that have one "
                "with `execbox papers search QUERY --docker` (catalog.search(query, has_docker=True)), "
                "or give PaperExecutor(image=...)"
            )
        from .._docker_engine import docker_client
        from ..images._build import image_exists

        client = docker_client()
        if asset.docker_image and image_exists(client, asset.docker_image):
            return asset.docker_image
        if not asset.dockerfile_text:
            return (
                asset.docker_image or ""
            )  # the engine tries to pull it, and says how to build it if it cannot
        return self._build_from_catalog(client, asset)

    def _build_from_catalog(self, client: Any, asset: PaperAsset) -> str:
        name = asset.docker_image or f"execbox/paper-{_slug(asset.arxiv_id)}:latest"
        build = self.build_missing
        if build is None:
            build = self._confirm(
                f"The image {name} of paper {asset.arxiv_id} is not on this machine, "
                "but the catalog has its Dockerfile. Build it now?"
            )
        if not build:
            raise ConfigurationError(
                f"the image {name} of paper {asset.arxiv_id} is not on this machine and cannot be pulled "
                "here; the catalog has its Dockerfile: build it with PaperExecutor(..., build_missing=True) "
                f"or `execbox explore {asset.arxiv_id} --build`"
            )
        from docker.utils import parse_repository_tag

        from ..images import ImageSpec, build_image

        with tempfile.TemporaryDirectory(prefix="execbox-paper-") as folder:
            dockerfile = Path(folder) / "Dockerfile"
            dockerfile.write_text(asset.dockerfile_text or "")
            tag = build_image(ImageSpec(dockerfile=str(dockerfile)), on_progress=self._progress)
        repository, version = parse_repository_tag(name)
        client.images.get(tag).tag(repository, version or "latest")
        return name


def _callers_level() -> int:
    """The ``stacklevel`` that makes a warning of the calling function point at
    the first line outside execbox: the user's, however deep the start came
    (``with``, ``start()``, ``run()``, ``explore()``); a fixed level pointed
    into execbox, or past the stack (``sys:1``)."""
    frame = inspect.currentframe()
    frame = frame.f_back if frame is not None else None  # the function that warns: level 1
    level = 1
    while frame is not None:
        if not frame.f_code.co_filename.startswith(_PACKAGE):
            return level
        frame, level = frame.f_back, level + 1
    return 1  # nothing outside execbox (a thread of its own): the line that warns


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-") or "paper"


def _ask_on_terminal(question: str) -> bool:
    if not sys.stdin.isatty():
        return False
    answer = input(f"{question} [y/N] ")
    return answer.strip().lower() in ("y", "yes")
