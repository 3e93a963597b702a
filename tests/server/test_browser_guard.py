"""What a web page of another site could make a browser send to a server
on loopback, refused (a real server, raw requests as the browser would
send them): a "simple" cross-site POST (text/plain, a form, multipart, no
Content-Type), a foreign Origin or ``Sec-Fetch-Site: cross-site``, a
rebound DNS name in ``Host``; workspace files as downloads that cannot run
script; and a large JSON body that no longer stalls every other client."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import httpx
import pytest

from tests.server._http import error_of, open_session, running_server

EVIL = "http://evil.example"


def _marker_code(marker: Path) -> str:
    return f"open({str(marker)!r}, 'w').write('ran')"


@pytest.mark.parametrize(
    "headers, content",
    [
        ({"Content-Type": "text/plain"}, None),
        ({"Content-Type": "text/plain", "Origin": EVIL}, None),
        ({"Content-Type": "application/x-www-form-urlencoded"}, None),
        ({"Content-Type": "multipart/form-data; boundary=x"}, None),
        ({}, None),  # fetch() of a Blob with no type sends no Content-Type at all
    ],
)
def test_a_simple_cross_site_post_runs_nothing(client, tmp_path, headers, content):
    marker = tmp_path / "ran"
    body = json.dumps({"code": _marker_code(marker)}).encode()
    response = client.post("/v1/run", content=body, headers=headers)
    assert response.status_code in (403, 415), response.text
    if "Origin" not in headers:
        assert (
            "Content-Type: application/json" in error_of(response, 415, "unsupported_media_type")["message"]
        )
    assert not marker.exists()


def test_a_foreign_origin_or_cross_site_fetch_is_403_and_the_own_origin_runs(client, server, tmp_path):
    marker = tmp_path / "ran"
    body = {"code": _marker_code(marker)}
    refused = client.post("/v1/run", json=body, headers={"Origin": EVIL})
    assert "--allow-origin" in error_of(refused, 403, "forbidden")["message"]
    error_of(client.post("/v1/sessions", json={}, headers={"Origin": "null"}), 403, "forbidden")
    error_of(client.post("/v1/run", json=body, headers={"Sec-Fetch-Site": "cross-site"}), 403, "forbidden")
    error_of(client.get("/v1/info", headers={"Origin": EVIL}), 403, "forbidden")  # CORS reads refused too
    assert not marker.exists()
    own = client.post("/v1/run", json=body, headers={"Origin": server.url, "Sec-Fetch-Site": "same-origin"})
    assert own.status_code == 200, own.text
    assert marker.read_text() == "ran"


def test_allow_origin_lets_that_origin_alone_call():
    with (
        running_server("--backend", "local", "--allow-origin", "https://app.example") as server,
        server.client() as client,
    ):
        assert (
            client.post(
                "/v1/run", json={"code": "print(2)"}, headers={"Origin": "https://app.example"}
            ).json()["stdout"]
            == "2\n"
        )
        error_of(client.post("/v1/run", json={"code": "1"}, headers={"Origin": EVIL}), 403, "forbidden")


def test_a_rebound_host_name_is_403_and_allow_host_serves_it(client, server):
    port = server.url.rsplit(":", 1)[1]
    for path in ("/v1/info", "/"):
        refused = client.get(path, headers={"Host": f"anything.attacker.example:{port}"})
        assert "--allow-host" in error_of(refused, 403, "forbidden")["message"]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "localhost"):
        assert client.get("/v1/info", headers={"Host": host}).status_code == 200, host
    with (
        running_server("--backend", "local", "--allow-host", "box.internal") as allowing,
        allowing.client() as other,
    ):
        assert other.get("/v1/info", headers={"Host": "box.internal:8443"}).status_code == 200
        error_of(other.get("/v1/info", headers={"Host": "evil.example"}), 403, "forbidden")


def test_a_workspace_file_is_a_sandboxed_download(client):
    sid = open_session(client)["id"]
    client.put(f"/v1/sessions/{sid}/files/x.html", content=b"<script>alert(1)</script>")
    response = client.get(f"/v1/sessions/{sid}/files/x.html")
    assert response.content == b"<script>alert(1)</script>"
    assert response.headers["content-disposition"].startswith('attachment; filename="x.html"')
    assert response.headers["x-content-type-options"] == "nosniff"
    assert response.headers["content-security-policy"] == "sandbox; default-src 'none'"
    client.put(f'/v1/sessions/{sid}/files/d/\u00e9 "q".svg', content=b"<svg/>")
    odd = client.get(f'/v1/sessions/{sid}/files/d/\u00e9 "q".svg').headers["content-disposition"]
    assert odd == "attachment; filename=\"___q_.svg\"; filename*=UTF-8''%C3%A9%20%22q%22.svg"


def test_json_nesting_and_value_count_are_bounded(client):
    deep = "[" * 65 + "]" * 65
    message = error_of(
        client.post(
            "/v1/run", content=f'{{"code": "1", "x": {deep}}}', headers={"Content-Type": "application/json"}
        ),
        400,
        "bad_request",
    )["message"]
    assert "MAX_JSON_DEPTH" in message
    assert client.post("/v1/run", json={"code": "1", "x": [[[1]]]}).status_code == 200
    with running_server("--backend", "local", "--max-upload-mb", "16") as big, big.client() as other:
        many = error_of(other.post("/v1/run", json={"code": "1", "x": [0] * 1_000_001}), 413, "too_large")
        assert "MAX_JSON_ITEMS" in many["message"]
        strings = error_of(
            other.post("/v1/run", json={"code": "1", "x": ["a"] * 1_000_001}), 413, "too_large"
        )
        assert "MAX_JSON_ITEMS" in strings["message"]


def test_a_large_body_being_parsed_does_not_stall_other_clients():
    body = json.dumps({"code": "1", "x": [{"name": f"k{i}", "v": "a" * 24} for i in range(300_000)]}).encode()
    assert len(body) > 14 << 20
    with (
        running_server("--backend", "local", "--max-upload-mb", "32") as server,
        server.client(timeout=60.0) as poster,
        server.client() as prober,
    ):
        done: list[int] = []
        thread = threading.Thread(
            target=lambda: done.append(
                poster.post("/v1/run", content=body, headers={"Content-Type": "application/json"}).status_code
            )
        )
        thread.start()
        waits = []
        while thread.is_alive():
            started = time.monotonic()
            assert prober.get("/v1/info").status_code == 200
            waits.append(time.monotonic() - started)
            time.sleep(0.02)
        thread.join()
        assert done == [200]
        assert len(waits) >= 3, waits  # it was probed while the body was read and parsed
        assert max(waits) < 1.0, waits  # before: the loop parsed it, /v1/info waited seconds


def test_the_client_and_httpx_send_hosts_that_are_served(server):
    from execbox.client import Client

    with Client(server.url, server.token) as made:
        assert made.info()
    with httpx.Client() as plain:
        assert (
            plain.get(
                server.url.replace("127.0.0.1", "localhost") + "/v1/info",
                headers={"Authorization": f"Bearer {server.token}"},
            ).status_code
            == 200
        )
