"""The remote backend: blocks run by an ``execbox serve`` elsewhere, in a
session of its own, behind the same Executor interface as the others.

    >>> with create_executor("remote", url="http://127.0.0.1:8000", token=...) as ex:
    ...     ex.run(CodeBlock("python", "print(1)"))

``start`` opens a session on the server (``backend``, ``limits``,
``env``); each run is one execution of it, streamed (the run's events come
as the server sends them, to ``on_event``/``stream`` as from any
executor), waiting in line behind another caller's run (``?queue=1``)
rather than failing. Cancelling (a cancelled ``arun``, a closed stream,
``restart``) asks the server to kill the block. ``restart`` ends the
session and opens a new one (a stateful backend starts afresh); ``close``
ends it.

The workspace is local and mirrored (``_mirror.Mirror``): files written
here are sent before a run, files the run wrote there are fetched after
it, so code that reads results by path works unchanged. The token is never
saved by ``to_config`` (give it again, or set ``EXECBOX_TOKEN``).

The server is not trusted (``execbox.client`` reads its answers as
hostile, each bounded by ``max_answer_bytes``): a run's stream ends by a
deadline of its own (``run_deadline``: each block's ``Limits.timeout_s``,
twice over for a run that waits in line behind another caller's, plus
``timeout_s`` to start), and the files it names are written only inside
the local workspace (``Workspace`` refuses ``..``, absolute paths, links).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from ..._errors import ExecboxError, ServiceError
from ..._gpus import parse_gpus
from ..._languages import Language
from ..._models import CodeBlock, ExecutionResult, Limits
from ..._run_events import EndEvent, EventSink, OutputEvent, StartEvent
from ..._workspace import INTERNAL_DIR, Workspace
from .._base import Executor
from .._executor_api import Capabilities
from .._process import Cancellation, OutputCallback
from .._result import Outcome
from ._mirror import Mirror

__all__ = ["RemoteExecutor"]

# How often a run's watcher looks whether it was cancelled.
CANCEL_POLL_S = 0.05
# The most to wait for the server to open a session (its backend starting:
# a container, a kernel), unless RemoteExecutor(start_timeout_s=...) says.
START_TIMEOUT_S = 300.0


def run_deadline(blocks: int, limits: Limits, timeout_s: float) -> float:
    """The most a run of ``blocks`` blocks may stream, in seconds: each
    block's time, twice (queued behind a run as long), and ``timeout_s``."""
    return 2 * blocks * limits.timeout_s + timeout_s


class RemoteExecutor(Executor):
    """Runs blocks on an ``execbox serve`` at ``url`` (default: the
    ``EXECBOX_URL`` environment variable, else ``http://127.0.0.1:8000``),
    in a session of ``backend`` (the server's default when None) with these
    ``limits`` and ``env``; ``token`` defaults to ``EXECBOX_TOKEN``;
    ``timeout_s`` bounds each request, ``start_timeout_s`` the opening of
    a session (its backend starting there); ``max_answer_bytes`` each
    answer read (``Client``'s); ``gpus`` the NVIDIA GPUs its blocks get
    there (within the server's ``--allow-gpus``)."""

    name = "remote"

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        backend: str | None = None,
        env: Mapping[str, str] | None = None,
        ttl_s: float | None = None,
        idle_ttl_s: float | None = None,
        timeout_s: float = 60.0,
        start_timeout_s: float = START_TIMEOUT_S,
        max_answer_bytes: int | None = None,
        workspace: Workspace | str | None = None,
        limits: Limits | None = None,
        gpus: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(workspace=workspace, limits=limits, **options)
        self._policies = options.get("execution_policies")
        from ...client import Client  # httpx, imported when used

        self._init_options.pop("token", None)  # a secret: never saved with the config
        bound = {"max_answer_bytes": max_answer_bytes} if max_answer_bytes is not None else {}
        # run_timeout_s: the wait for a session (a run's stream has a deadline of its own, run_deadline)
        self._client = Client(
            url, token=token, timeout_s=timeout_s, run_timeout_s=start_timeout_s, **bound
        )  # url: EXECBOX_URL, else DEFAULT_URL
        self._timeout_s = timeout_s
        self.url = self._client.base_url
        self.backend = backend
        self._session_options = {
            "backend": backend,
            "env": dict(env) if env else None,
            "ttl_s": ttl_s,
            "idle_ttl_s": idle_ttl_s,
            "gpus": list(wanted) if (wanted := parse_gpus(gpus)) else None,  # allowed (or not) there
        }
        self._session: Any = None
        self._info: dict[str, Any] | None = None
        self._mirror = Mirror(self.workspace)
        self._sync_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"RemoteExecutor(url={self.url!r}, backend={self.backend!r}, limits={self.limits!r})"

    @property
    def session(self) -> Any:
        """The ``execbox.client.Session`` runs go to (None before ``start``):
        its files, its expiry, an upload while a block runs."""
        return self._session

    @property
    def mirror_skipped(self) -> list[str]:
        """Paths the mirror did not send or bring back (links, a path that
        is a folder on the other side...)."""
        return list(self._mirror.skipped)

    @property
    def capabilities(self) -> Capabilities:
        info = self._server_info()
        name = self.backend or str(info.get("default_backend", ""))
        backends = info.get("backends")
        served = backends.get(name) if isinstance(backends, dict) else None
        if not isinstance(served, dict):
            served = {}

        def names(key: str) -> tuple[str, ...]:  # the server's: a list of strings, else nothing
            value = served.get(key)
            return tuple(v for v in value if isinstance(v, str)) if isinstance(value, list) else ()

        return Capabilities(
            backend=self.name,
            isolated=served.get("isolated") is True,
            stateful=served.get("stateful") is True,
            enforced=frozenset(names("enforced")),
            languages=names("languages"),
            mechanisms={"all": f"enforced by the {name} backend of the server at {self.url}"},
        )

    def _server_info(self) -> dict[str, Any]:
        if self._info is None:
            self._info = self._client.info()
        return self._info

    def _warn_unenforced(self) -> None:
        """The server's backend enforces what it can; it says so in /v1/info."""

    def _start(self) -> None:
        options: dict[str, Any] = {k: v for k, v in self._session_options.items() if v is not None}
        if self._policies is not None:
            options["execution_policies"] = dict(self._policies)
        try:
            self._session = self._client.session(
                limits=self.limits, keep_code_files=self.keep_code_files, **options
            )
        except ServiceError as exc:
            if exc.code != "timeout":
                raise
            raise ServiceError(
                f"{exc.message.split(': raise ')[0]}: the session did not open within "
                "RemoteExecutor(start_timeout_s=...); raise it if the backend there starts "
                "that slowly",
                code="timeout",
                retryable=exc.retryable,
            ) from None
        self._mirror.reset()

    def _stop(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                session.close()
            except ExecboxError:  # expired or unreachable: nothing left to end there
                pass

    def close(self) -> None:
        super().close()
        self._client.close()

    def _execute(
        self, language: Language, code_path: str, cancel: Cancellation, on_output: OutputCallback | None
    ) -> Outcome:
        raise NotImplementedError("the remote executor sends whole runs (_run_blocks)")

    def _run_blocks(self, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink) -> ExecutionResult:
        """One execution on the server, its events handed on as they come."""
        self.start()
        with self._state_lock:
            self._active.add(cancel)
            session = self._session
        try:
            with self._sync_lock:
                self._mirror.push(session)
            result = self._stream(session, blocks, cancel, sink)
            with self._sync_lock:
                self._mirror.pull(
                    session,
                    (*result.files, *(f for f in result.code_files if not f.startswith(f"{INTERNAL_DIR}/"))),
                )
            return result
        finally:
            with self._state_lock:
                self._active.discard(cancel)

    def _stream(
        self, session: Any, blocks: list[CodeBlock], cancel: Cancellation, sink: EventSink
    ) -> ExecutionResult:
        done = threading.Event()
        started: list[str] = []

        def watch() -> None:  # a cancel becomes the server's cancel of this execution
            while not done.wait(CANCEL_POLL_S):
                if cancel.is_set() and started:
                    try:
                        session.cancel(started[0] or None)
                    except ExecboxError:
                        pass
                    return

        watcher = threading.Thread(target=watch, name="execbox-remote-cancel", daemon=True)
        watcher.start()
        result: ExecutionResult | None = None
        try:
            deadline = run_deadline(len(blocks), self.limits, self._timeout_s)
            for event in session.stream(blocks=blocks, queue=True, timeout_s=deadline):
                if isinstance(event, StartEvent):
                    started.append(event.execution_id or "")
                if isinstance(event, OutputEvent):
                    sink.block = event.block
                    sink(event.stream, event.text)
                    continue
                if isinstance(event, EndEvent):
                    result = event.result
                    if result is None:  # the server could not run it at all
                        raise ExecboxError(
                            f"the server at {self.url} could not run the blocks: "
                            f"{(event.error or {}).get('message', 'no reason given')}"
                        )
                sink.emit(event)
        except ServiceError:
            if started and result is None:  # given up on (its deadline, a bad answer): not left running there
                try:
                    session.cancel(started[0] or None)
                except ExecboxError:
                    pass
            raise
        finally:
            done.set()
            watcher.join()
        if result is None:
            raise ExecboxError(f"the stream from {self.url} ended without a result")
        return result
