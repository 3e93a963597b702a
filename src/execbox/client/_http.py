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
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from .._errors import ConfigurationError, ServiceError
from .._version import __version__
from ._wire import service_error

__all__ = ["KEEP_ALIVE_S", "Transport", "load_httpx"]

KEEP_ALIVE_S = 4.0  # under the server's least keep-alive (server._config.MIN_KEEP_ALIVE_S, 5 s)


def load_httpx() -> Any:
    try:
        import httpx
    except ImportError:
        raise ConfigurationError("execbox.Client needs httpx: pip install 'execbox[client]'") from None
    return httpx


class Transport:
    """Requests to one server. ``timeout_s`` bounds every wait for the
    server itself (connect, a route that runs no code, a quiet stream
    between its keepalives); ``run_timeout_s`` the wait for a ``slow``
    answer, one that waits on the backend: code that runs, an executor that
    starts (None: as long as the server's limits let it)."""

    def __init__(self, base_url: str, token: str | None, *, timeout_s: float, run_timeout_s: float | None) -> None:
        self._httpx = httpx = load_httpx()
        if not base_url.startswith(("http://", "https://")):
            raise ConfigurationError(f"base_url {base_url!r} must start with http:// or https://, such as "
                                     "'http://127.0.0.1:8000'")
        self.base_url = base_url.rstrip("/")
        self.token = token or None
        self.timeout_s = timeout_s
        self.run_timeout_s = run_timeout_s

        headers = {"User-Agent": f"execbox-client/{__version__}"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        pool = httpx.HTTPTransport(retries=1, limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE_S))
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=httpx.Timeout(timeout_s),
                                    transport=pool)

    def close(self) -> None:
        self._client.close()

    def _timeout(self, slow: bool) -> Any:
        if not slow:
            return self._httpx.Timeout(self.timeout_s)
        return self._httpx.Timeout(self.timeout_s, read=self.run_timeout_s)

    def request(self, method: str, path: str, *, slow: bool = False, **kwargs: Any) -> Any:
        """The answer (read whole) to a request; ServiceError unless 2xx."""
        with self._no_answer(method, path, slow):
            response = self._client.request(method, path, timeout=self._timeout(slow), **kwargs)
        _check(response)
        return response

    def json(self, method: str, path: str, *, slow: bool = False, **kwargs: Any) -> Any:
        response = self.request(method, path, slow=slow, **kwargs)
        try:
            return response.json()
        except ValueError:
            raise ServiceError(f"{method} {self.base_url}{path} answered {response.status_code} with a body that "
                               f"is not JSON: {response.text[:200]!r} (is this execbox serve?)",
                               status=response.status_code, code="bad_answer") from None

    @contextlib.contextmanager
    def open(self, method: str, path: str, *, slow: bool = False, **kwargs: Any) -> Iterator[Any]:
        """A streamed answer (its status checked, its body not yet read), closed on exit."""
        with self._no_answer(method, path, slow):
            request = self._client.build_request(method, path, timeout=self._timeout(slow), **kwargs)
            response = self._client.send(request, stream=True)
        try:
            if not 200 <= response.status_code < 300:
                with self._no_answer(method, path, slow):
                    response.read()
                _check(response)
            yield response
        finally:
            response.close()

    def chunks(self, response: Any, method: str, path: str, *, slow: bool = False) -> Iterator[str]:
        """A streamed answer's text as it comes."""
        with self._no_answer(method, path, slow):
            yield from response.iter_text()

    def lines(self, response: Any, method: str, path: str, *, slow: bool = False) -> Iterator[str]:
        with self._no_answer(method, path, slow):
            yield from response.iter_lines()

    @contextlib.contextmanager
    def _no_answer(self, method: str, path: str, slow: bool) -> Iterator[None]:
        """httpx's failures to get (all of) an answer, as ServiceError (status None)."""
        httpx = self._httpx
        url = f"{self.base_url}{path}"
        try:
            yield
        except httpx.ConnectError as exc:
            raise ServiceError(f"cannot connect to execbox serve at {self.base_url} ({exc}): start it with "
                               f"`execbox serve` (pip install 'execbox[server]'), or pass the URL it listens "
                               f"on as Client(base_url=...)", code="unreachable", retryable=True) from None
        except httpx.TimeoutException as exc:
            if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)) or not slow:
                setting = "Client(timeout_s=...)"
            else:
                setting = "Client(run_timeout_s=...), or a smaller Limits.timeout_s"
            raise ServiceError(f"{method} {url} got no answer in time ({type(exc).__name__}): raise "
                               f"{setting}", code="timeout", retryable=method != "POST") from None
        except httpx.TransportError as exc:
            # a POST (a run, an execution, a session) may have taken effect: the caller looks first
            what = "it may have taken effect (code run, a session made): look before repeating it" \
                if method == "POST" else "retry the request"
            raise ServiceError(f"{method} {url}: the connection was lost before the whole answer came "
                               f"({type(exc).__name__}: {exc}); {what}", code="connection_lost",
                               retryable=method != "POST") from None


def _check(response: Any) -> None:
    """ServiceError for an answer that is not 2xx (the body already read)."""
    if 200 <= response.status_code < 300:
        return
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if not isinstance(error, dict):  # not the server's shape: a proxy's page, another service
        error = {"code": f"http_{response.status_code}",
                 "message": f"{response.request.method} {response.request.url} answered {response.status_code} "
                            f"{response.reason_phrase}: {response.text[:200]!r} (is this execbox serve?)"}
    retry_after = response.headers.get("retry-after")
    try:
        wait = float(retry_after) if retry_after is not None else None
    except ValueError:
        wait = None
    if response.status_code == 401:
        sent = "none" if "authorization" not in response.request.headers else "one the server does not take"
        error = {**error, "message": f"{error.get('message', '')}; this client sent {sent}: pass "
                                     "Client(token=...) or set EXECBOX_TOKEN to the server's token"}
    raise service_error(error, status=response.status_code, retry_after=wait)
