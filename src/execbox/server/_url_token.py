"""The server's token carried in the URL, for ``/run_code`` alone:
``POST /t/<token>/run_code``. SandboxFusion's clients (veRL's reward code)
are configured with a URL and nothing else, and post to it as given, so a
server that takes a token is usable by them unchanged only if the token
rides in that URL.

``PathToken``, just inside the connection layer, turns such a request into
``POST /run_code`` carrying ``Authorization: Bearer <token>`` (the token
percent-decoded: ``execbox serve`` prints it encoded, ``quote(token,
safe="")``), so that ``BearerAuth`` checks it as it checks every other
token: in constant time, with the same 401 and message for a wrong one.
Another route under ``/t/<token>/`` is not opened by it: every other route
takes the token only in the header, as before (there is no route there:
401 without the header, 404 with it).

The token never reaches a log: the request's ``path`` and ``raw_path`` are
rewritten in place to ``/t/redacted/...`` (uvicorn's access log and
execbox's connection log read this same scope), for any path under
``/t/``, since a token put in another route's URL is a secret too; then
``/run_code``'s request is routed as ``/run_code``."""

from __future__ import annotations

import re
from urllib.parse import quote, unquote, unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["SHOWN", "PathToken", "run_code_url"]

ROUTE = "/run_code"
SHOWN = "/t/redacted"  # what a log says instead of /t/<token>
_PATH = re.compile(rb"^/t/([^/]+)(/.*)?$", re.DOTALL)


def run_code_url(base: str, token: str | None) -> str:
    """``/run_code``'s URL under ``base`` (``http://HOST:PORT``), with ``token`` in it when set."""
    base = base.rstrip("/")
    return f"{base}/t/{quote(token, safe='')}{ROUTE}" if token else f"{base}{ROUTE}"


class PathToken:
    """``/t/<token>/run_code`` → ``/run_code`` with the token as the bearer header (see the module)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path") or quote(scope["path"]).encode("ascii")
        found = _PATH.match(raw.partition(b"?")[0])
        if found is None:
            await self.app(scope, receive, send)
            return
        rest = found[2] or b""
        # in place: the server's own log lines read this scope, not a copy of it
        scope["path"] = SHOWN + unquote(rest.decode("latin-1"))
        scope["raw_path"] = SHOWN.encode() + rest
        if rest != ROUTE.encode():  # another route: none is there, and its token is not read
            await self.app(scope, receive, send)
            return
        headers = [(name, value) for name, value in scope["headers"] if name != b"authorization"]
        scope["headers"] = [*headers, (b"authorization", b"Bearer " + unquote_to_bytes(found[1]))]
        await self.app({**scope, "path": ROUTE, "raw_path": ROUTE.encode()}, receive, send)
