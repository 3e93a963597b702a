"""The playground's routes without a browser: the page and its files
(served without the token, with a content security policy), ``POST
/v1/extract`` (the library's own rules), and ``execbox playground``
(a server on a free loopback port, the URL printed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import httpx

from tests.server._http import SRC, error_of, free_port, running_server


def test_the_page_and_its_files(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert '<script src="/playground/playground.js"' in page.text
    for name, kind in [
        ("playground.js", "text/javascript"),
        ("playground.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ]:
        answer = client.get(f"/playground/{name}")
        assert answer.status_code == 200 and answer.headers["content-type"].startswith(kind), name
    error_of(client.get("/playground/../_app.py"), 404, "not_found")
    error_of(client.get("/playground/index.html"), 404, "not_found")


def test_extract_splits_a_reply_as_the_library_does(client):
    reply = "Here:\n\n```python\nprint(1)\n```\n\n```sh title=x.sh\necho 2\n```\n\n```python\nnot closed\n"
    blocks = client.post("/v1/extract", json={"text": reply}).json()["blocks"]
    assert [(b["language"], b["code"]) for b in blocks] == [("python", "print(1)"), ("sh", "echo 2")]
    assert client.post("/v1/extract", json={"text": "no code"}).json() == {"blocks": []}
    error_of(client.post("/v1/extract", json={}), 400, "bad_request")
    error_of(client.post("/v1/extract", json={"text": 3}), 400, "bad_request")


def test_with_a_token_the_page_is_public_and_the_api_is_not():
    with running_server("--backend", "local", token="t0k") as server:
        bare = httpx.Client(base_url=server.url)
        assert bare.get("/").status_code == 200 and bare.get("/playground/playground.js").status_code == 200
        error_of(bare.post("/v1/extract", json={"text": ""}), 401, "unauthorized")
        error_of(bare.post("/"), 401, "unauthorized")  # only GET of the page's own files is public
        with server.client() as client:
            assert client.post("/v1/extract", json={"text": ""}).status_code == 200
        bare.close()


def test_execbox_playground_serves_the_page_on_loopback():
    port = free_port()
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "execbox.cli",
            "playground",
            "--no-browser",
            "--backend",
            "local",
            "--port",
            str(port),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                page = httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, (
                    "execbox playground did not answer"
                )
                time.sleep(0.1)
        assert "execbox playground" in page.text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert f"http://127.0.0.1:{port}/" in proc.stderr.read().decode()  # type: ignore[union-attr]
    proc.stderr.close()  # type: ignore[union-attr]
