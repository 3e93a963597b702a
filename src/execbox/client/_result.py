"""``RunResult``: what ``Client.run`` returns, an ``ExecutionResult`` with
the files the run was asked to fetch (``fetch_files``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._models import ExecutionResult
from ._answers import bad_answer, check_result
from ._wire import decode_file, encode_file

__all__ = ["RunResult"]


@dataclass(frozen=True, kw_only=True)
class RunResult(ExecutionResult):
    """An ``ExecutionResult`` of a stateless run (its workspace is gone when
    it answers), with what ``fetch_files`` asked for: ``fetched`` maps each
    path read to its bytes; ``fetch_errors`` each path that could not be
    read to why (not there, a folder, over the server's size limit): data,
    as the code that did not write it is data."""

    fetched: Mapping[str, bytes] = field(default_factory=dict, hash=False)
    fetch_errors: Mapping[str, str] = field(default_factory=dict, hash=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunResult:
        """The answer of ``POST /v1/run`` (or a batch line): the result and
        its ``file_contents``."""
        check_result(data, "the run's result")
        contents = data.get("file_contents") or {}
        if not isinstance(contents, Mapping):
            raise bad_answer("the run's result", f"its 'file_contents' is not an object: {contents!r:.80}")
        fetched, errors = {}, {}
        for path, spec in contents.items():
            if isinstance(spec, Mapping) and isinstance(spec.get("content"), str):
                try:
                    fetched[path] = decode_file(spec)
                except ValueError:  # base64 that is not
                    raise bad_answer(
                        "the run's result", f"file_contents[{path!r:.80}] is not base64"
                    ) from None
            else:
                errors[path] = str(spec.get("error") if isinstance(spec, Mapping) else spec)
        result = ExecutionResult.from_dict(data)
        plain = {name: getattr(result, name) for name in ExecutionResult.__dataclass_fields__}
        return cls(**plain, fetched=fetched, fetch_errors=errors)

    def to_dict(self) -> dict[str, Any]:
        """As the server sent it: the fetched files as ``file_contents``."""
        data = super().to_dict()
        data.pop("fetched")
        data.pop("fetch_errors")
        contents: dict[str, Any] = {path: {"error": why} for path, why in self.fetch_errors.items()}
        contents.update({path: encode_file(content) for path, content in self.fetched.items()})
        if contents:
            data["file_contents"] = contents
        return data
