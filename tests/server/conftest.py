"""Fixtures of the server tests: a server on the local backend (the sandbox
may be asked for), shared by a module, and a client of it (httpx; SSE
through httpx-sse). Helpers: ``_http.py``."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import REQUIRE_ALL
from tests.server._http import Server, running_server

MISSING = [
    name
    for name in ("starlette", "uvicorn", "pydantic", "httpx_sse")
    if importlib.util.find_spec(name) is None
]
if MISSING and not REQUIRE_ALL:  # skipped, as a missing component is (under EXECBOX_REQUIRE=all: fails)
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """A server on the local backend (the sandbox may be asked for)."""
    with running_server(
        "--backend",
        "local",
        "--backends",
        "sandbox",
        "--max-upload-mb",
        "1",
        "--max-concurrency",
        "4",
        "--sse-keepalive",
        "0.5",
    ) as running:
        yield running


@pytest.fixture
def client(server: Server) -> Iterator[httpx.Client]:
    with server.client() as made:
        yield made
