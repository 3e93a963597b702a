"""Options that a paper's executor and its exploration do not take, answered
with a ``ConfigurationError`` that names what to pass instead.

``PaperExecutor("2010.11929v2", api_key="k")`` handed ``api_key`` on to the
docker backend, whose ``TypeError`` named the wrong class and not the
catalog that takes the key; ``explore(llm_model=...)`` (AG2's and the Remyx
SDK's spellings) got Python's bare "unexpected keyword argument". The
functions keep their closed signatures (a type checker still flags a typo);
``refusing`` checks the names when they are called.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import ParamSpec, TypeVar

from .._errors import ConfigurationError
from .._foreign import EXECUTOR_HINTS

__all__ = ["EXPLORE_HINTS", "PAPER_HINTS", "check_paper_options", "refusing"]

P = ParamSpec("P")
R = TypeVar("R")

_MODEL = (
    "pass model=: a model's name (model='gpt-4o-mini') or a client, "
    "model=ModelClient('gpt-4o-mini', base_url=..., api_key=...)"
)
_LLM_CONFIG = (
    _MODEL
    + " (AG2's llm_config={'model': M, 'api_key': K, 'base_url': U} is ModelClient(M, api_key=K, base_url=U))"
)
_CATALOG_KEY = (
    "the paper catalog takes the Remyx key: pass catalog=RemyxCatalog(api_key=...) (or set REMYXAI_API_KEY)"
)
_TO_EXPLORE = "the model belongs to the exploration: pass it to paper.explore(model=...)"

# What a PaperExecutor is given that belongs elsewhere
PAPER_HINTS: Mapping[str, str] = {
    **EXECUTOR_HINTS,
    "api_key": _CATALOG_KEY,
    "remyx_api_key": _CATALOG_KEY,
    "base_url": (
        "the catalog's address goes to catalog=RemyxCatalog(base_url=...); a model's to "
        "paper.explore(model=ModelClient(..., base_url=...))"
    ),
    "model": _TO_EXPLORE,
    "llm_model": _TO_EXPLORE,
    "llm_config": _TO_EXPLORE,
}

# What an exploration (explore(), create_agents()) is given in other tools' spellings
EXPLORE_HINTS: Mapping[str, str] = {
    "llm_model": _MODEL,
    "model_name": _MODEL,
    "llm": _MODEL,
    "llm_config": _LLM_CONFIG,
    "config_list": _LLM_CONFIG,
    "api_key": (
        "the model's key goes to its client: model=ModelClient(name, api_key=...) (or set OPENAI_API_KEY)"
    ),
    "base_url": "the model's server goes to its client: model=ModelClient(name, base_url=...)",
    "human_input_mode": "pass interactive=True (a person is asked before each step) or interactive=False",
    "timeout": "a block's time limit is the executor's: PaperExecutor(..., timeout=...)",
}


def _refusal(what: str, name: str, accepted: Iterable[str], hints: Mapping[str, str]) -> ConfigurationError:
    hint = hints.get(name) or f"it takes {', '.join(sorted(accepted))}"
    return ConfigurationError(f"{what} takes no {name}: {hint}")


def check_paper_options(docker_options: Mapping[str, object], docker_takes: Iterable[str]) -> None:
    """Refuse a ``PaperExecutor`` option that neither it nor the docker backend takes."""
    takes = frozenset(docker_takes)
    for name in docker_options:
        if name not in takes:
            own = {"arxiv_id", "catalog", "timeout", "build_missing", "confirm"}
            raise _refusal("PaperExecutor", name, (own | takes) - {"environment"}, PAPER_HINTS)


def refusing(hints: Mapping[str, str]) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Wrap ``func`` so that a keyword it does not take is a ``ConfigurationError``
    naming what to pass instead (``hints``), not Python's ``TypeError``."""

    def wrap(func: Callable[P, R]) -> Callable[P, R]:
        accepted = [
            p.name
            for p in inspect.signature(func).parameters.values()
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and p.name != "self"
        ]
        what = func.__qualname__ + "()"

        @functools.wraps(func)
        def call(*args: P.args, **kwargs: P.kwargs) -> R:
            for name in kwargs:
                if name not in accepted:
                    raise _refusal(what, name, accepted, hints)
            return func(*args, **kwargs)

        return call

    return wrap
