"""A paper as a catalog describes it: the fields of a Remyx asset."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._errors import ConfigurationError

__all__ = ["PaperAsset"]

DEFAULT_WORKING_DIRECTORY = "/app"


@dataclass(frozen=True)
class PaperAsset:
    """One paper: its metadata and, when it has one, its ready-made Docker
    environment (``docker_image``, ``working_directory`` inside it, the
    ``environment_vars`` it needs, ``dockerfile_text`` to build it)."""

    arxiv_id: str
    title: str = ""
    abstract: str = ""
    authors: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    url: str | None = None
    published_at: str | None = None
    github_url: str | None = None
    docker_image: str | None = None
    has_docker: bool = False
    working_directory: str = DEFAULT_WORKING_DIRECTORY
    environment_vars: tuple[str, ...] = ()
    docker_build_status: str | None = None
    reasoning: str | None = None
    quickstart_hint: str | None = None
    dockerfile_s3_uri: str | None = None
    dockerfile_text: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PaperAsset:
        """An asset from the API's JSON or a catalog file; unknown fields are
        kept in ``extra``, lists may be given as one comma-separated string."""
        if not isinstance(data, Mapping) or not data.get("arxiv_id"):
            got = dict(data) if isinstance(data, Mapping) else data
            raise ConfigurationError(f"a paper needs at least an 'arxiv_id': got {got!r}")
        names = {f.name for f in dataclasses.fields(cls)} - {"extra"}
        values: dict[str, Any] = {}
        for key, value in data.items():
            if key not in names or value is None:
                continue
            if key in ("authors", "categories", "environment_vars"):
                value = (
                    tuple(v.strip() for v in value.split(",") if v.strip())
                    if isinstance(value, str)
                    else tuple(str(v) for v in value)
                )
            elif key == "has_docker":
                value = bool(value)
            elif key == "working_directory":
                value = str(value) or DEFAULT_WORKING_DIRECTORY
            else:
                value = str(value)
            values[key] = value
        if "has_docker" not in data and values.get("docker_image"):
            values["has_docker"] = True
        extra = {k: v for k, v in data.items() if k not in names}
        return cls(**values, extra=extra)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        for key in ("authors", "categories", "environment_vars"):
            data[key] = list(data[key])
        return data
