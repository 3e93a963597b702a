"""``Session``: an executor kept on the server between requests (a Jupyter
kernel keeps its variables, every backend its workspace), until it is
closed or expires. Made by ``Client.session()``.

A session belongs to whoever holds its key: the server answers it once,
when the session is made, and every request on the session carries it
(``X-Execbox-Session-Key``, through ``_Keyed``). The key is never shown
(not in ``repr`` nor ``info()``); ``key`` gives it to code that must hand
the session to another process."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Self, cast

from .._errors import ServiceError, SessionGoneError
from .._models import ExecutionResult
from .._run_events import RunEvent
from ._answers import bad_answer, check_id, check_result
from ._http import Transport
from ._stream import SSE, follow
from ._wire import BlockLike, code_body, parse_time, quote_path, service_error

__all__ = ["KEY_HEADER", "Session"]

KEY_HEADER = "X-Execbox-Session-Key"  # execbox.server._sessions.KEY_HEADER


class _Keyed:
    """A transport whose every request carries one session's key."""

    def __init__(self, transport: Transport, key: str) -> None:
        self._inner = transport
        self._key = key

    def _with_key(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {**kwargs, "headers": {**(kwargs.get("headers") or {}), KEY_HEADER: self._key}}

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._inner.request(method, path, **self._with_key(kwargs))

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._inner.json(method, path, **self._with_key(kwargs))

    def open(self, method: str, path: str, **kwargs: Any) -> Any:
        return self._inner.open(method, path, **self._with_key(kwargs))

    def __getattr__(self, name: str) -> Any:  # reading a response, its errors: the transport's own
        return getattr(self._inner, name)


class Session:
    """One session of ``execbox serve``; a context manager whose exit
    deletes it. A session runs one execution at a time (another meanwhile
    is a 409 ``ServiceError``); it ends when closed, ``ttl_s`` after it
    was made, or ``idle_ttl_s`` after its last use; then every call raises
    ``SessionGoneError`` with the ``reason``."""

    def __init__(self, transport: Transport, info: dict[str, Any]) -> None:
        key = info.pop("key", None) if isinstance(info, dict) else None
        if not isinstance(key, str) or not key or not (key.isascii() and key.isprintable()):
            raise ServiceError(
                'POST /v1/sessions answered no usable session key ("key"): is this an execbox '
                "serve with per-session keys?",
                code="bad_answer",
            )
        self._key = key
        self._transport = cast(Transport, _Keyed(transport, key))
        self._info = info
        self.id: str = check_id(info.get("id"), "POST /v1/sessions answered")  # goes into every URL
        self._path = f"/v1/sessions/{self.id}"
        self._running: str | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"<Session {self.id} backend={self.backend!r} expires_at={self._info.get('expires_at')}>"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def key(self) -> str:
        """The session's secret (``X-Execbox-Session-Key``): whoever holds it
        (and the server's token) may drive, read and delete the session."""
        return self._key

    @property
    def backend(self) -> str:
        return str(self._info.get("backend", ""))

    @property
    def expires_at(self) -> datetime | None:
        """When the session ends whatever happens (its ``ttl_s``)."""
        return parse_time(self._info.get("expires_at"))

    @property
    def idle_expires_at(self) -> datetime | None:
        """When it ends unless used (``idle_ttl_s`` after its last use), as
        of the last ``info()``, ``keepalive()`` or ``reset()``."""
        return parse_time(self._info.get("idle_expires_at"))

    def info(self) -> dict[str, Any]:
        """The session as the server sees it now (times, limits, executions)."""
        return self._refresh("GET", "")

    def keepalive(self) -> dict[str, Any]:
        """Count as used now (its idle time starts again); its info."""
        return self._refresh("POST", "/keepalive")

    def reset(self) -> dict[str, Any]:
        """Stop what runs and start the backend afresh (a new kernel:
        variables are gone); the files stay. Its info."""
        return self._refresh("POST", "/reset", slow=True)

    def _refresh(self, method: str, suffix: str, slow: bool = False) -> dict[str, Any]:
        self._info = self._transport.json(method, self._path + suffix, slow=slow)
        return self._info

    def run(
        self,
        code: str | None = None,
        language: str = "python",
        *,
        blocks: Sequence[BlockLike] | None = None,
        queue: bool = False,
    ) -> ExecutionResult:
        """Run code (or ``blocks``) in the session and wait for its result.
        The code's own failure is ``result.error``; a cancelled run's result
        has the error ``Cancelled``. While another execution runs: a 409
        ``ServiceError``, or with ``queue`` a wait for its end. Never retried
        by the client."""
        body = code_body(code, language, blocks)
        summary = self._transport.json(
            "POST", f"{self._path}/executions", json=body, slow=True, params={"queue": 1} if queue else None
        )
        if summary.get("result") is None:
            raise service_error(summary.get("error"))
        return ExecutionResult.from_dict(check_result(summary["result"], "the execution's result"))

    def stream(
        self,
        code: str | None = None,
        language: str = "python",
        *,
        blocks: Sequence[BlockLike] | None = None,
        queue: bool = False,
        timeout_s: float | None = None,
    ) -> Iterator[RunEvent]:
        """Run code and yield its events as they come: ``StartEvent`` (with
        the ``execution_id``) first, ``EndEvent`` (with the whole
        ``ExecutionResult``) last. A connection that drops before the end
        is resumed from the last event seen. The code starts when the
        iteration does; leaving the loop early leaves it running (``cancel()``).
        ``queue``: as for ``run`` (the first event comes once it runs).
        ``timeout_s``: the most the whole stream may take (default:
        ``Client(run_timeout_s)``; None there too: as long as events or
        keepalives come); past it, a ``ServiceError`` (timeout)."""
        body = code_body(code, language, blocks)
        return self._follow(
            timeout_s,
            opener=lambda deadline: self._transport.open(
                "POST",
                f"{self._path}/executions",
                json=body,
                headers=SSE,
                params={"queue": 1} if queue else None,
                slow=queue,
                deadline=deadline,
            ),
        )

    def events(
        self, execution_id: str, *, after: int = 0, timeout_s: float | None = None
    ) -> Iterator[RunEvent]:
        """The events of one of the session's last executions after event
        number ``after`` (0: all of them), as they come until its end
        (``timeout_s``: as for ``stream``)."""
        return self._follow(timeout_s, execution_id=execution_id, after=after)

    def _follow(self, timeout_s: float | None, opener: Any = None, **how: Any) -> Iterator[RunEvent]:
        wait = timeout_s if timeout_s is not None else self._transport.run_timeout_s
        deadline = None if wait is None else time.monotonic() + wait  # from the iteration's start
        how["setting"] = "timeout_s=..." if timeout_s is not None else "Client(run_timeout_s=...)"
        if opener is not None:
            how["start"] = lambda: opener(deadline)

        def running(execution_id: str) -> None:
            self._running = execution_id

        try:
            yield from follow(
                self._transport, f"{self._path}/executions", on_execution=running, deadline=deadline, **how
            )
        finally:
            self._running = None

    def cancel(self, execution_id: str | None = None) -> ExecutionResult | None:
        """Stop the execution ``execution_id`` (default: the one that runs, a
        stream's or a ``run``'s in another thread); its result (what it
        printed, the error ``Cancelled``). None when nothing runs."""
        execution_id = execution_id or self._running or self.info().get("running_execution")
        if execution_id is None:
            return None
        check_id(execution_id, "the execution to cancel")  # the server's, maybe: it goes into the URL
        summary = self._transport.json("POST", f"{self._path}/executions/{execution_id}/cancel")
        result = summary.get("result")
        return (
            ExecutionResult.from_dict(check_result(result, "the cancelled execution's result"))
            if result is not None
            else None
        )

    def upload(self, path: str, data: bytes | str) -> dict[str, Any]:
        """Write a file of the workspace (str as UTF-8); ``{name, size, mime}``."""
        content = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return self._transport.json("PUT", f"{self._path}/files/{quote_path(path)}", content=content)

    def download(self, path: str) -> bytes:
        """A file of the workspace, its bytes."""
        return self._transport.request("GET", f"{self._path}/files/{quote_path(path)}").content

    def files(self, path: str | None = None) -> list[dict[str, Any]]:
        """What is in the workspace (or in its folder ``path``): ``{name,
        type: "file" | "dir", size, mtime, mime}`` each."""
        params = {"path": path} if path is not None else None
        listing = self._transport.json("GET", f"{self._path}/files", params=params).get("files")
        if not isinstance(listing, list) or not all(isinstance(item, dict) for item in listing):
            raise bad_answer(
                "GET .../files answered", f"its 'files' is not a list of objects: {listing!r:.200}"
            )
        return listing

    def delete(self, path: str) -> None:
        """Remove a file (a link, an empty folder) of the workspace."""
        self._transport.json("DELETE", f"{self._path}/files/{quote_path(path)}")

    def close(self) -> None:
        """Delete the session (what runs is stopped, its workspace removed).
        Closing one that already ended does nothing."""
        if self._closed:
            return
        try:
            self._info = self._transport.json("DELETE", self._path)
        except SessionGoneError:
            pass
        except ServiceError as exc:
            if exc.status != 404:
                raise
        self._closed = True
