"""Who may talk to the server from a browser: ``RequestGuard`` refuses,
with 403 and the reason, before auth and before any route runs:

- a ``Host`` that is not a name the server is served as (DNS rebinding: a
  page on ``attacker.example`` whose name now points at 127.0.0.1): allowed
  are ``127.0.0.1``, ``localhost``, ``[::1]`` and ``--host`` (with any
  port: a forwarded one too), and every ``--allow-host``;
- an ``Origin`` that is not the server's own (``http://`` + the ``Host``
  it was reached as) nor an ``--allow-origin`` (cross-site request forgery:
  any page can POST a "simple" request with no CORS preflight);
- ``Sec-Fetch-Site: cross-site`` on a method that changes state.

The JSON endpoints also take only ``Content-Type: application/json``
(``_wire.read_json``: 415), which no page can send cross-origin without a
preflight this server never answers."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from ._errors import ApiError, error_response

__all__ = ["RequestGuard", "host_names"]

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def host_names(host: str) -> set[str]:
    """The names the server is served as: loopback's and ``--host`` (an IPv6 address in brackets)."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if host and host not in ("0.0.0.0", "::"):
        names.add(f"[{host}]" if ":" in host and not host.startswith("[") else host)
    return names


class RequestGuard:
    """403 for a foreign ``Host``, ``Origin`` or cross-site state change (see the module)."""

    def __init__(
        self, app: ASGIApp, host: str, allow_hosts: tuple[str, ...] = (), allow_origins: tuple[str, ...] = ()
    ) -> None:
        self.app = app
        self.names = {name.lower() for name in host_names(host)}
        self.allow_hosts = {name.lower() for name in allow_hosts}
        self.allow_origins = {origin.lower().rstrip("/") for origin in allow_origins}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope)
            if refused is not None:
                await error_response(ApiError(403, "forbidden", refused))(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def host_allowed(self, host: str) -> bool:
        """Whether ``host`` (``NAME`` or ``NAME:PORT``) is one of the names
        served. Its port is not compared: a forwarded port (``ssh -L``,
        ``docker -p 9000:8000``) reaches the server as another, and a page
        of another site cannot make its browser send one of these names."""
        if host in self.allow_hosts:
            return True
        if host.startswith("["):
            name = host[: host.find("]") + 1]
        else:
            name = host.rpartition(":")[0] if ":" in host else host
        return name in self.names or name in self.allow_hosts

    def refusal(self, scope: Scope) -> str | None:
        headers: dict[bytes, str] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, value.decode("latin-1").strip().lower())
        host = headers.get(b"host", "")
        if not self.host_allowed(host):
            return (
                f"Host {host!r} is not a name this server is served as: it takes "
                f"{', '.join(sorted(self.names | self.allow_hosts))} (any port); allow another with "
                "execbox serve --allow-host NAME "
                "(refused so that a page whose name resolves here cannot reach it: DNS rebinding)"
            )
        origin = headers.get(b"origin")
        if origin is not None:
            own = f"{scope.get('scheme', 'http')}://{host}"
            if origin.rstrip("/") != own and origin.rstrip("/") not in self.allow_origins:
                return (
                    f"Origin {origin!r} is not this server's own ({own}): a page of another site may not "
                    "call it; allow one with execbox serve --allow-origin ORIGIN"
                )
        if headers.get(b"sec-fetch-site") == "cross-site" and scope.get("method") not in SAFE_METHODS:
            return (
                "Sec-Fetch-Site: cross-site: a page of another site may not change state here; "
                "call the API from this server's own page or a non-browser client"
            )
        return None
