"""Fixtures of the playground's browser tests: a real ``execbox serve``
on loopback (local backend, Jupyter for the stateful session), Debian's
Chromium driven by the PyPI ``playwright`` package, a fresh page per test
(a JavaScript error in it fails the test), and ``shot`` to save a
screenshot (into ``$EXECBOX_SCREENSHOTS`` when set: how the ones in
docs/playground/ were made)."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import require

CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    # Module scope, not session: while Playwright's sync driver is open its event loop is
    # marked running on this thread, and every later test that runs its own loop
    # (asyncio.run, anyio) would fail with "Cannot run the event loop while another loop is running".
    require(
        "playwright",
        importlib.util.find_spec("playwright") is not None,
        "pip install playwright (the dev extra; ./dev.sh does)",
    )
    require("chromium", os.access(CHROMIUM, os.X_OK), "apt-get install chromium (./dev.sh does)")
    require(
        "the service",
        all(importlib.util.find_spec(m) for m in ("starlette", "uvicorn", "httpx")),
        "pip install 'execbox[server]' (./dev.sh does)",
    )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        # --no-sandbox: Chromium refuses to start as root with its own sandbox on, and the test
        # browser runs as root in CI; it only ever loads our own page from a server on loopback.
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    from tests.server._http import running_server

    with running_server("--backend", "local", "--backends", "jupyter", "--sse-keepalive", "1") as running:
        yield running


@pytest.fixture
def page(browser: Any, server: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    errors: list[str] = []
    opened.on("pageerror", lambda exc: errors.append(str(exc)))
    opened.goto(server.page_url)  # the link execbox serve prints: the page takes the token from it
    opened.locator("#session", has_text="Session s_").wait_for()
    try:
        yield opened
    finally:
        context.close()
    assert not errors, errors


@pytest.fixture
def shot(tmp_path: Path) -> Callable[[Any, str], Path]:
    where = Path(os.environ.get("EXECBOX_SCREENSHOTS") or tmp_path)

    def save(page: Any, name: str) -> Path:
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return save
