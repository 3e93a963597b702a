"""The client's HTTP layer: httpx (imported when a ``Client`` is made, not
with execbox), the bearer token, two timeouts by meaning, and every failure
as a ``ServiceError``: an error answer in the server's shape, or no answer.

httpx's exceptions stop here (``_no_answer``): a refused connection names
the URL and ``execbox serve``; a timeout names the setting to change; a
connection lost mid-answer says the run may have happened (never retried:
a run is not idempotent).

Connections: a pooled one idle ``KEEP_ALIVE_S`` (4 s) is dropped, not
reused: ``execbox serve`` keeps an idle one 75 s (``--keep-alive``, at
least 5 s) and says so (``Keep-Alive: timeout``), so that it never closes
one as a request is sent on it (a POST then lost unanswered). The one retry:
a connection that could not be made (the request never left), once.

What comes back is read as hostile (the server may not be execbox, or
not honest): no answer is read past ``max_answer_bytes``
(``MAX_ANSWER_BYTES``, 256 MiB by default; one announced bigger is refused
before a byte of it is read; a line or an event of a stream is cut there
too); no answer is waited for past a deadline (``timeout_s`` for the whole
of a route that runs no code, however slowly its bytes drip; a stream and
a slow answer ``run_timeout_s`` when given); no redirect is followed (a
3xx is an error naming where it points: the bearer token never goes to
another origin, nor a run's body).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from .._errors import ConfigurationError, ServiceError, install_hint
from .._version import __version__
from ._answers import parse_json
from ._wire import service_error

__all__ = ["KEEP_ALIVE_S", "MAX_ANSWER_BYTES", "Transport", "load_httpx"]

KEEP_ALIVE_S = 4.0  # under the server's least keep-alive (server._config.MIN_KEEP_ALIVE_S, 5 s)
# The most of one answer read (a whole answer, a stream's line or event):
# above the server's own largest (a result whose fetched files fill
# ``--max-upload-mb``'s 100 MiB, base64); Client(max_answer_bytes=...).
MAX_ANSWER_BYTES = 256 * 1024 * 1024


def load_httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ConfigurationError(f"execbox.Client needs httpx: {install_hint('client')}") from None
    return httpx


class Transport:
    """Requests to one server. ``timeout_s`` bounds every wait for the
    server itself (connect, a route that runs no code, a quiet stream
    between its keepalives); ``run_timeout_s`` the wait for a ``slow``
    answer, one that waits on the backend: code that runs, an executor that
    starts (None: as long as the server's limits let it)."""

    def __init__(
        self,
        base_url: str,
        token: str | None,
        *,
        timeout_s: float,
        run_timeout_s: float | None,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        self._httpx = httpx = load_httpx()
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"base_url {base_url!r} must start with http:// or https://, such as 'http://127.0.0.1:8000'"
            )
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.timeout_s = timeout_s
        self.run_timeout_s = run_timeout_s
        self.max_answer_bytes = max_answer_bytes

        headers = {"User-Agent": f"execbox-client/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        pool = httpx.HTTPTransport(retries=1, limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_S))
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s),
            transport=pool,
            follow_redirects=False,
        )

    def close(self) -> None:
        self._client.close()

    def _timeout(self, slow: bool, deadline: float | None = None) -> Any:
        """httpx's timeouts; a wait for one read ends by ``deadline`` too."""
        read = self.run_timeout_s if slow else self.timeout_s
        if deadline is not None:
            left = max(0.001, deadline - time.monotonic())
            read = left if read is None else min(read, left)
        return self._httpx.Timeout(self.timeout_s, read=read)

    def deadline(self, slow: bool) -> float | None:
        """When a whole answer must have come (``time.monotonic()``), None for no deadline."""
        wait = self.run_timeout_s if slow else self.timeout_s
        return None if wait is None else time.monotonic() + wait

    def request(self, method: str, path: str, *, slow: bool = False, **kwargs: Any) -> Any:
        """The answer (read whole, bounded) to a request; ServiceError unless 2xx."""
        deadline = self.deadline(slow)
        with self._no_answer(method, path, slow):
            timeout = self._timeout(slow, deadline)
            request = self._client.build_request(method, path, timeout=timeout, **kwargs)
            response = self._client.send(request, stream=True)
            try:
                body = self._read(response, method, path, slow, deadline)
            finally:
                response.close()
        answer = self._answer(response, body)
        _check(answer)
        return answer

    def _answer(self, response: Any, body: bytes) -> Any:
        """A streamed response with its body as read (decoded already), for _check and the callers."""
        headers = [
            (k, v)
            for k, v in response.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return self._httpx.Response(
            response.status_code, headers=headers, content=body, request=response.request
        )

    def _read(self, response: Any, method: str, path: str, slow: bool, deadline: float | None) -> bytes:
        """The body, refused past ``max_answer_bytes`` (announced or read) or ``deadline``."""
        announced = response.headers.get("content-length", "")
        if announced.isdigit() and int(announced) > self.max_answer_bytes:
            raise self.too_large(method, path, f"announces {int(announced)} bytes")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_answer_bytes:
                raise self.too_large(method, path, f"sent more than {self.max_answer_bytes} bytes")
            chunks.append(chunk)
            self.check_deadline(
                deadline, method, path, "Client(run_timeout_s=...)" if slow else "Client(timeout_s=...)"
            )
        return b"".join(chunks)

    def too_large(self, method: str, path: str, what: str) -> ServiceError:
        return ServiceError(
            f"{method} {self.base_url}{path}: the answer {what}, over this client's "
            f"{self.max_answer_bytes} (Client(max_answer_bytes=...)); is this execbox serve?",
            code="too_large",
        )

    def check_deadline(self, deadline: float | None, method: str, path: str, setting: str) -> None:
        if deadline is not None and time.monotonic() > deadline:
            raise ServiceError(
                f"{method} {self.base_url}{path}: the answer did not end in time (its bytes "
                f"came, too slowly or without end): raise {setting} if the server is that "
                "slow",
                code="timeout",
                retryable=method != "POST",
            )

    def json(self, method: str, path: str, *, slow: bool = False, **kwargs: Any) -> Any:
        """The answer's JSON object."""
        response = self.request(method, path, slow=slow, **kwargs)
        what = f"{method} {self.base_url}{path} answered {response.status_code}"
        data = parse_json(response.content, what)
        if not isinstance(data, dict):
            raise ServiceError(
                f"{what} with JSON that is not an object: {response.text[:200]!r} (is this execbox serve?)",
                status=response.status_code,
                code="bad_answer",
            )
        return data

    @contextlib.contextmanager
    def open(
        self, method: str, path: str, *, slow: bool = False, deadline: float | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        """A streamed answer (its status checked, its body not yet read), closed on exit;
        no read waits past ``deadline``."""
        with self._no_answer(method, path, slow):
            timeout = self._timeout(slow, deadline)
            request = self._client.build_request(method, path, timeout=timeout, **kwargs)
            response = self._client.send(request, stream=True)
        try:
            if not 200 <= response.status_code < 300:
                with self._no_answer(method, path, slow):
                    body = self._read(response, method, path, slow, self.deadline(False))
                _check(self._answer(response, body))
            yield response
        finally:
            response.close()

    def chunks(
        self,
        response: Any,
        method: str,
        path: str,
        *,
        slow: bool = False,
        deadline: float | None = None,
        setting: str = "Client(run_timeout_s=...)",
    ) -> Iterator[str]:
        """A streamed answer's text as it comes, until ``deadline`` (``time.monotonic()``;
        ``setting`` names what sets it)."""
        with self._no_answer(method, path, slow):
            for chunk in response.iter_text():
                self.check_deadline(deadline, method, path, setting)
                yield chunk

    @contextlib.contextmanager
    def _no_answer(self, method: str, path: str, slow: bool) -> Iterator[None]:
        """httpx's failures to get (all of) an answer, as ServiceError (status None)."""
        httpx = self._httpx
        url = f"{self.base_url}{path}"
        try:
            yield
        except httpx.ConnectError as exc:
            raise ServiceError(
                f"cannot connect to execbox serve at {self.base_url} ({exc}): start it with "
                f"`execbox serve` (its server extra: {install_hint('server')}), or pass the URL it listens "
                f"on as Client(base_url=...)",
                code="unreachable",
                retryable=True,
            ) from None
        except httpx.TimeoutException as exc:
            if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)) or not slow:
                setting = "Client(timeout_s=...)"
            else:
                setting = "Client(run_timeout_s=...), or a smaller Limits.timeout_s"
            raise ServiceError(
                f"{method} {url} got no answer in time ({type(exc).__name__}): raise {setting}",
                code="timeout",
                retryable=method != "POST",
            ) from None
        except httpx.TransportError as exc:
            # a POST (a run, an execution, a session) may have taken effect: the caller looks first
            what = (
                "it may have taken effect (code run, a session made): look before repeating it"
                if method == "POST"
                else "retry the request"
            )
            raise ServiceError(
                f"{method} {url}: the connection was lost before the whole answer came "
                f"({type(exc).__name__}: {exc}); {what}",
                code="connection_lost",
                retryable=method != "POST",
            ) from None


def _check(response: Any) -> None:
    """ServiceError for an answer that is not 2xx (the body already read)."""
    if 200 <= response.status_code < 300:
        return
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError, RecursionError):
        error = None
    if 300 <= response.status_code < 400:  # never followed: the token and the body would go along
        error = {
            "code": "redirect",
            "message": f"{response.request.method} {response.request.url} answered {response.status_code} "
            f"{response.reason_phrase}, a redirect to "
            f"{response.headers.get('location')!r:.200}: "
            "this client follows no redirect (the token would go with it); pass "
            "Client(base_url=...) the URL of execbox serve itself",
        }
    elif not isinstance(error, dict):  # not the server's shape: a proxy's page, another service
        error = {
            "code": f"http_{response.status_code}",
            "message": f"{response.request.method} {response.request.url} answered {response.status_code} "
            f"{response.reason_phrase}: {response.text[:200]!r} (is this execbox serve?)",
        }
    retry_after = response.headers.get("retry-after")
    try:
        wait = float(retry_after) if retry_after is not None else None
    except ValueError:
        wait = None
    if response.status_code == 401:
        sent = "none" if "authorization" not in response.request.headers else "one the server does not take"
        error = {
            **error,
            "message": f"{error.get('message', '')}; this client sent {sent}: pass "
            "Client(token=...) or set EXECBOX_TOKEN to the server's token",
        }
    raise service_error(error, status=response.status_code, retry_after=wait)
