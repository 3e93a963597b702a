"""``RemyxCatalog``: papers from the Remyx API, over plain HTTPS (urllib).

The key given is the key sent: ``api_key`` when passed, else the environment
variable ``REMYXAI_API_KEY`` as it is when the catalog is made. Nothing is
read from ``.env`` files. The key is never printed; messages say where it
came from.
"""

from __future__ import annotations

import builtins
import json
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any

from .._errors import CatalogError, ConfigurationError, PaperNotFoundError
from ._asset import PaperAsset
from ._catalog import Catalog, check_arxiv_id, check_page, check_search

__all__ = ["DEFAULT_REMYX_URL", "MAX_SEARCH_RESULTS", "RemyxCatalog"]

DEFAULT_REMYX_URL = "https://engine.remyx.ai/api/v1.0"
API_KEY_VARIABLE = "REMYXAI_API_KEY"
API_URL_VARIABLE = "REMYXAI_API_URL"
#: The most results the API gives for one search.
MAX_SEARCH_RESULTS = 50


class RemyxCatalog(Catalog):
    """The Remyx paper catalog.

    ``api_key``: the key to send (default: ``REMYXAI_API_KEY``, read now).
    ``base_url``: the API root (default: ``REMYXAI_API_URL``, else
    ``https://engine.remyx.ai/api/v1.0``). ``timeout_s``: per request.

    Making the catalog does no I/O and does not need a key; a request without
    one raises ``CatalogError``. ``search(max_results=...)`` above 50 (the
    API's limit) raises ``ConfigurationError`` rather than quietly returning
    fewer papers than asked for.
    """

    def __init__(
        self, api_key: str | None = None, *, base_url: str | None = None, timeout_s: float = 30
    ) -> None:
        self._api_key: str | None
        if api_key is not None:
            self._api_key, self.key_source = api_key, "RemyxCatalog(api_key=...)"
        else:
            self._api_key, self.key_source = os.environ.get(API_KEY_VARIABLE), API_KEY_VARIABLE
        if base_url is not None:
            url, self.url_source = base_url, "RemyxCatalog(base_url=...)"
        elif os.environ.get(API_URL_VARIABLE):
            url, self.url_source = os.environ[API_URL_VARIABLE], API_URL_VARIABLE
        else:
            url, self.url_source = DEFAULT_REMYX_URL, f"the default; set {API_URL_VARIABLE} to change it"
        if not url.startswith(("http://", "https://")):
            raise ConfigurationError(
                f"the Remyx API URL must start with http:// or https://: got {url!r} (from {self.url_source})"
            )
        if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or timeout_s <= 0:
            raise ConfigurationError(
                f"RemyxCatalog(timeout_s=...) must be a positive number of seconds: got {timeout_s!r}"
            )
        self.base_url = url.rstrip("/")
        self.timeout_s = float(timeout_s)
        self.description = f"the Remyx API at {self.base_url}"

    def __repr__(self) -> str:
        key = "set" if self._api_key else "missing"
        return (
            f"RemyxCatalog(base_url={self.base_url!r}, key={key} from {self.key_source}, "
            f"timeout_s={self.timeout_s})"
        )

    # -- the four questions -------------------------------------------------

    def get(self, arxiv_id: str) -> PaperAsset:
        arxiv_id = check_arxiv_id(arxiv_id)
        try:
            data = self._request("GET", f"/search/assets/{urllib.parse.quote(arxiv_id, safe='')}")
        except _NotFound:
            raise PaperNotFoundError(arxiv_id, self.description) from None
        if not isinstance(data, Mapping):
            raise self._bad_answer("/search/assets/ID", f"expected a JSON object, got {type(data).__name__}")
        # Some servers wrap the asset: {"asset": {...}}.
        if "arxiv_id" not in data and isinstance(data.get("asset"), Mapping):
            data = data["asset"]
        return self._asset(data, "/search/assets/ID")

    def search(
        self,
        query: str,
        *,
        max_results: int = 10,
        has_docker: bool | None = None,
        categories: Sequence[str] | None = None,
        use_llm: bool = False,
    ) -> list[PaperAsset]:
        query, cats = check_search(query, max_results, categories)
        if max_results > MAX_SEARCH_RESULTS:
            raise ConfigurationError(
                f"max_results={max_results} is more than the Remyx API gives "
                f"({MAX_SEARCH_RESULTS}): ask for at most {MAX_SEARCH_RESULTS}"
            )
        body: dict[str, Any] = {"query": query, "max_results": max_results, "use_llm": bool(use_llm)}
        if has_docker is not None:
            body["has_docker"] = bool(has_docker)
        if cats:
            body["categories"] = builtins.list(cats)
        data = self._request("POST", "/search/assets", body=body)
        return self._assets(data, "/search/assets")[:max_results]

    def list(
        self, *, limit: int = 20, offset: int = 0, has_docker: bool | None = None, category: str | None = None
    ) -> builtins.list[PaperAsset]:
        check_page(limit, offset)
        params: dict[str, str] = {"limit": str(limit), "offset": str(offset)}
        if has_docker is not None:
            params["has_docker"] = "true" if has_docker else "false"
        if category:
            params["category"] = category
        data = self._request("GET", "/search/assets/list?" + urllib.parse.urlencode(params))
        return self._assets(data, "/search/assets/list")

    def stats(self) -> dict[str, Any]:
        data = self._request("GET", "/search/stats")
        if not isinstance(data, dict):
            raise self._bad_answer("/search/stats", f"expected a JSON object, got {type(data).__name__}")
        return data

    # -- the wire -----------------------------------------------------------

    def _request(self, method: str, path: str, *, body: Mapping[str, Any] | None = None) -> Any:
        """The decoded JSON answer; HTTP and network failures translated."""
        if not self._api_key:
            what = (
                f"no Remyx API key ({self.key_source} is empty)"
                if self._api_key == ""
                else "no Remyx API key"
            )
            raise CatalogError(
                f"{what}: set {API_KEY_VARIABLE} or pass RemyxCatalog(api_key=...) "
                "(or use only local catalogs: execbox papers ... --offline --catalog FILE)"
            )
        url = self.base_url + path
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "application/json",
            "User-Agent": "execbox",
        }
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc, path) from None
        except TimeoutError:
            raise CatalogError(
                f"the Remyx API at {self.base_url} did not answer within {self.timeout_s:g} s "
                "(RemyxCatalog(timeout_s=...)): try again later or raise the timeout"
            ) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise CatalogError(
                    f"the Remyx API at {self.base_url} did not answer within {self.timeout_s:g} s "
                    "(RemyxCatalog(timeout_s=...)): try again later or raise the timeout"
                ) from None
            raise CatalogError(
                f"cannot reach the Remyx API at {self.base_url} (from {self.url_source}): "
                f"{reason}: check the network and {API_URL_VARIABLE}"
            ) from None
        try:
            return json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self._bad_answer(path, f"not JSON: {_excerpt(raw)!r}") from None

    def _http_error(self, exc: urllib.error.HTTPError, path: str) -> Exception:
        detail = _detail(exc)
        where = f"the Remyx API at {self.base_url}"
        if exc.code == 404:
            if path.startswith("/search/assets/") and not path.startswith("/search/assets/list"):
                return _NotFound()
            return CatalogError(
                f"{where} has no {path.split('?')[0]} (404{detail}): is {API_URL_VARIABLE} "
                f"right? it should end in /api/v1.0 (from {self.url_source})"
            )
        if exc.code in (401, 403):
            return CatalogError(
                f"{where} refused the API key from {self.key_source} ({exc.code}{detail}): "
                f"check {API_KEY_VARIABLE} or the api_key you pass"
            )
        if exc.code >= 500:
            return CatalogError(
                f"{where} answered {exc.code}{detail}: the service is failing, try again later"
            )
        return CatalogError(f"{where} rejected the request to {path.split('?')[0]} ({exc.code}{detail})")

    def _bad_answer(self, path: str, problem: str) -> CatalogError:
        return CatalogError(
            f"the Remyx API at {self.base_url} gave an answer execbox cannot use for "
            f"{path.split('?')[0]}: {problem}: is {API_URL_VARIABLE} the Remyx API "
            f"(from {self.url_source})?"
        )

    def _asset(self, data: Mapping[str, Any], path: str) -> PaperAsset:
        try:
            return PaperAsset.from_dict(data)
        except ConfigurationError as exc:
            raise self._bad_answer(path, str(exc)) from None

    def _assets(self, data: Any, path: str) -> builtins.list[PaperAsset]:
        items = data.get("assets", data.get("results")) if isinstance(data, Mapping) else data
        if not isinstance(items, builtins.list):
            raise self._bad_answer(path, 'expected a list of assets or {"assets": [...]}')
        return [self._asset(item, path) for item in items]


class _NotFound(Exception):
    """A 404 for one asset; turned into PaperNotFoundError by ``get``."""


def _excerpt(raw: bytes, limit: int = 120) -> str:
    text = raw.decode("utf-8", "replace").strip().replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def _detail(exc: urllib.error.HTTPError) -> str:
    """``: <the server's reason>`` from an error answer, on one line."""
    try:
        raw = exc.read()
    except OSError:
        raw = b""
    reason = ""
    try:
        data = json.loads(raw)
        if isinstance(data, Mapping):
            found = data.get("detail") or data.get("error") or data.get("message")
            if isinstance(found, Mapping):
                found = found.get("message")
            reason = str(found or "")
    except (json.JSONDecodeError, UnicodeDecodeError):
        reason = _excerpt(raw)
    reason = reason or (exc.reason if isinstance(exc.reason, str) else "")
    return f": {_excerpt(reason.encode())}" if reason else ""
