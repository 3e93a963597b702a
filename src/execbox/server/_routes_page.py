"""The playground: ``GET /`` (one page) and its static files under
``/playground/`` (real files in ``server/playground/``, no build step),
and ``POST /v1/extract``, which splits a pasted model reply into its
fenced blocks with the library's own rules (``extract_code_blocks``), so
that the page and ``execbox run`` agree on what a reply holds.

The page and its files are served without the bearer token (they are the
same for everyone and hold no secret); every ``/v1/`` call the page makes
carries the token of its link (``/?token=...``, as ``execbox serve``
prints it: kept for the tab, taken out of the address bar) or the one the
person typed, and each session's key. The page is served with
``Referrer-Policy: no-referrer``, so the link's token is sent nowhere."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response

from .._extract import extract_code_blocks
from ._bodies import ExtractRequest, checked
from ._errors import ApiError
from ._openapi_ops import ERROR, ApiRoute, Op, json_answer_of
from ._openapi_schemas import ref
from ._state import state_of
from ._wire import read_json

__all__ = ["PUBLIC_PATHS", "ROUTES"]

STATIC = Path(__file__).parent / "playground"
FILES = {"playground.js": "text/javascript", "playground.css": "text/css", "favicon.svg": "image/svg+xml"}
PUBLIC_PATHS = frozenset({"/", *(f"/playground/{name}" for name in FILES)})
HEADERS = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}


async def page(request: Request) -> Response:
    # the page's own script and style only; a run's HTML is shown in a sandboxed iframe (srcdoc),
    # blobs for images
    policy = (
        "default-src 'self'; img-src 'self' blob: data:; frame-src 'self' blob:; "
        "style-src 'self'; script-src 'self'; object-src 'none'; base-uri 'none'"
    )
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html",
        headers={**HEADERS, "Content-Security-Policy": policy, "Referrer-Policy": "no-referrer"},
    )


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in FILES:
        raise ApiError(404, "not_found", f"no playground file {name!r}")
    return FileResponse(STATIC / name, media_type=FILES[name], headers=HEADERS)


async def extract(request: Request) -> Response:
    """``{text}`` → ``{blocks: [{language, code, filename}]}``: the closed
    fenced blocks of a model's reply, in order."""
    body = checked(ExtractRequest, await read_json(request, state_of(request).config.max_upload_bytes))
    blocks = extract_code_blocks(body.text)
    return JSONResponse(
        {
            "blocks": [
                {
                    "language": b.language,
                    "code": b.code,
                    "filename": b.filename,
                    "language_inferred": b.language_inferred,
                }
                for b in blocks
            ]
        }
    )


ROUTES = [
    ApiRoute(
        "/",
        page,
        get={
            "summary": "The playground: a page to run a model's reply and watch it (no token needed "
            "for the page; its API calls send the one of its link, ?token=, or the one "
            "typed in it)",
            "security": [],
            "responses": {"200": {"description": "HTML", "content": {"text/html": {}}}},
        },
    ),
    ApiRoute(
        "/playground/{name}",
        static,
        get={
            "summary": "The playground's script, style and icon",
            "security": [],
            "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"enum": list(FILES)}}],
            "responses": {
                "200": {"description": "the file", "content": {kind: {} for kind in FILES.values()}},
                "404": ERROR,
            },
        },
    ),
    ApiRoute(
        "/v1/extract",
        extract,
        post=Op(
            "The closed fenced code blocks of a model's reply, in order (execbox.extract_code_blocks)",
            {"200": json_answer_of(ref("Extracted")), "400": ERROR, "413": ERROR},
            body=ExtractRequest,
        ),
    ),
]
