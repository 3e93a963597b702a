"""``Client``: execbox's Python client of ``execbox serve`` (runs, batches,
sessions), on httpx."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self

from .._errors import ConfigurationError, ServiceError
from .._judge import CaseResult, JudgeResult
from .._models import Limits
from ._answers import bad_answer, check_judged, parse_json
from ._http import MAX_ANSWER_BYTES, Transport
from ._result import RunResult
from ._session import Session
from ._sse import lines
from ._wire import BlockLike, batch_item, files_body, limits_body, run_body, service_error, with_gpus

__all__ = ["DEFAULT_URL", "Client"]

DEFAULT_URL = "http://127.0.0.1:8000"


class Client:
    """A connection to ``execbox serve`` at ``base_url`` (default:
    ``$EXECBOX_URL``, else ``http://127.0.0.1:8000``).

    - ``token``: the server's bearer token (default: ``$EXECBOX_TOKEN``;
      ``""`` sends none).
    - ``timeout_s``: the most to wait for the server itself: to connect,
      for a route that runs no code, between two events of a stream (the
      server sends a keepalive every ``--sse-keepalive`` seconds, 15 by
      default: keep ``timeout_s`` above it).
    - ``run_timeout_s``: the most to wait for the answer of a run, or for
      a whole stream (None: as long as the server's ``Limits.timeout_s``
      lets the code run).
    - ``max_answer_bytes``: the most of one answer read (a line or an
      event of a stream too; default ``MAX_ANSWER_BYTES``, 256 MiB): a
      bigger one is a ``ServiceError`` (too_large), never held whole.

    Whatever the server answers is checked before it is used: no redirect
    is followed (the token would go along), a body is read within
    ``timeout_s`` (``run_timeout_s`` for a run) however slowly it drips,
    and JSON of the wrong shape is a ``ServiceError`` (bad_answer).

    Nothing that runs code is retried by the client (a run is not
    idempotent); reading a stream again is, and ``Session.stream`` does.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = 30.0,
        run_timeout_s: float | None = None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        for name, value in (("timeout_s", timeout_s), ("run_timeout_s", run_timeout_s)):
            if value is not None and not (isinstance(value, (int, float)) and value > 0):
                raise ConfigurationError(
                    f"Client({name}=...) must be a positive number of seconds, got {value!r}"
                )
        if not (isinstance(max_answer_bytes, int) and max_answer_bytes > 0):
            raise ConfigurationError(
                f"Client(max_answer_bytes=...) must be a positive number of bytes, got {max_answer_bytes!r}"
            )
        if token is None:
            token = os.environ.get("EXECBOX_TOKEN")
        base_url = base_url or os.environ.get("EXECBOX_URL") or DEFAULT_URL
        self._transport = Transport(
            base_url,
            token,
            timeout_s=timeout_s,
            run_timeout_s=run_timeout_s,
            max_answer_bytes=max_answer_bytes,
        )

    @property
    def base_url(self) -> str:
        return self._transport.base_url

    def __repr__(self) -> str:
        return f"<Client {self.base_url} token={'set' if self._transport.token else 'none'}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections (sessions stay open on the server until
        closed or expired)."""
        self._transport.close()

    def info(self) -> dict[str, Any]:
        """The server: version, backends and languages, limits (default and
        maximum), capabilities, load."""
        return self._transport.json("GET", "/v1/info")

    def run(
        self,
        code: str | None = None,
        language: str = "python",
        *,
        blocks: Sequence[BlockLike] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        fetch_files: Sequence[str] | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        backend: str | None = None,
        gpus: Any = None,
    ) -> RunResult:
        """Run code (or ``blocks``: CodeBlock objects or ``{code, language?,
        filename?}`` dicts) in a fresh workspace holding ``files`` ({path:
        str or bytes}); its result, with the files ``fetch_files`` names
        read back (``result.fetched``). ``limits``: a ``Limits`` (all of
        it), or a dict of some of its fields over the server's defaults.
        ``gpus``: NVIDIA GPUs for the blocks, within the server's ``--allow-gpus``."""
        body = run_body(
            code,
            language,
            blocks=blocks,
            files=files,
            fetch_files=fetch_files,
            limits=limits,
            backend=backend,
            gpus=gpus,
        )
        return RunResult.from_dict(self._transport.json("POST", "/v1/run", json=body, slow=True))

    def judge(
        self,
        code: str,
        language: str,
        cases: Sequence[Mapping[str, Any]],
        *,
        compare: str = "lines",
        tolerance: float = 1e-6,
        stop_on_failure: bool = True,
        limits: Limits | Mapping[str, Any] | None = None,
        backend: str | None = None,
    ) -> JudgeResult:
        """``Executor.judge`` on the server (``POST /v1/judge``): ``code``
        against ``cases`` (``{stdin, expected_stdout | checker, name}``
        dicts), built once, a verdict each."""
        body: dict[str, Any] = {
            "code": code,
            "language": language,
            "cases": [dict(case) for case in cases],
            "compare": compare,
            "tolerance": tolerance,
            "stop_on_failure": stop_on_failure,
        }
        if limits is not None:
            body["limits"] = limits_body(limits)
        if backend is not None:
            body["backend"] = backend
        data = check_judged(self._transport.json("POST", "/v1/judge", json=body, slow=True), "/v1/judge")
        known = set(CaseResult.__dataclass_fields__)
        return JudgeResult(
            verdict=data["verdict"],
            language=data["language"],
            cases=tuple(
                CaseResult(**{k: v for k, v in c.items() if k in known}) for c in data.get("cases", [])
            ),
            compile_output=data.get("compile_output", ""),
            passed=data.get("passed", 0),
            total=data.get("total", 0),
            duration_s=data.get("duration_s", 0.0),
            backend=data.get("backend", ""),
        )

    def batch(
        self, requests: Sequence[str | Mapping[str, Any]], *, max_concurrency: int | None = None
    ) -> Iterator[tuple[int, RunResult | ServiceError]]:
        """Run many requests (code, or dicts of ``run``'s arguments), up to
        ``max_concurrency`` at once; yield ``(index, result)`` as each
        finishes, in that order: a request the server refused comes as its
        ``ServiceError``, in place of the result. The requests are checked
        now; they are sent when the iteration starts."""
        if isinstance(requests, (str, Mapping)):
            raise ConfigurationError("batch() takes a list of requests; for one, use run()")
        body: dict[str, Any] = {"requests": [batch_item(item, i) for i, item in enumerate(requests)]}
        if not body["requests"]:
            raise ConfigurationError("batch() needs at least one request")
        if max_concurrency is not None:
            body["max_concurrency"] = max_concurrency
        return self._batch(body)

    def _batch(self, body: dict[str, Any]) -> Iterator[tuple[int, RunResult | ServiceError]]:
        transport = self._transport
        deadline = transport.deadline(slow=True)
        what = "a line of POST /v1/batch"
        with transport.open("POST", "/v1/batch", json=body, slow=True, deadline=deadline) as response:
            chunks = transport.chunks(response, "POST", "/v1/batch", slow=True, deadline=deadline)
            for line in lines(chunks, transport.max_answer_bytes):
                if not line.strip():
                    continue
                item = parse_json(line, what)
                index = item.get("index") if isinstance(item, dict) else None
                count = len(body["requests"])
                if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
                    raise bad_answer(what, f"it is not an object with the index of a request: {line[:200]!r}")
                if "exit_code" in item:
                    yield index, RunResult.from_dict(item)
                else:
                    yield index, service_error(item.get("error"))

    def session(
        self,
        backend: str | None = None,
        *,
        limits: Limits | Mapping[str, Any] | None = None,
        ttl_s: float | None = None,
        idle_ttl_s: float | None = None,
        env: Mapping[str, str] | None = None,
        files: Mapping[str, str | bytes] | None = None,
        keep_code_files: bool | None = None,
        execution_policies: Mapping[str, str] | None = None,
        gpus: Any = None,
    ) -> Session:
        """Open a session: an executor kept between runs (``backend``: the
        server's default when None), with ``env`` set for its code and
        ``files`` in its workspace before it starts. ``ttl_s``: its whole
        life; ``idle_ttl_s``: how long it may stay unused (the server's
        defaults when None). ``keep_code_files`` and ``execution_policies``
        are the executor's options of those names; ``gpus``, NVIDIA GPUs for
        its blocks (within the server's ``--allow-gpus``)."""
        body: dict[str, Any] = with_gpus({}, gpus)
        if keep_code_files is not None:
            body["keep_code_files"] = keep_code_files
        if execution_policies is not None:
            body["execution_policies"] = dict(execution_policies)
        if backend is not None:
            body["backend"] = backend
        if limits is not None:
            body["limits"] = limits_body(limits)
        if ttl_s is not None:
            body["ttl_s"] = ttl_s
        if idle_ttl_s is not None:
            body["idle_ttl_s"] = idle_ttl_s
        if env:
            body["env"] = dict(env)
        if files:
            body["files"] = files_body(files)
        return Session(self._transport, self._transport.json("POST", "/v1/sessions", json=body, slow=True))
