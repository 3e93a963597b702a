"""The stateless routes against a real server: /v1/info, /openapi.json,
/v1/run, /v1/batch, and the error shape of each failure."""

from __future__ import annotations

import base64
import json

import pytest

from execbox.server import ServerConfig, create_app
from execbox.server._app import routes_of
from execbox.server._openapi import openapi
from tests.server._http import error_of


def test_info_says_version_backends_limits_and_load(client):
    info = client.get("/v1/info").json()
    assert info["version"] and info["default_backend"] == "local"
    assert set(info["backends"]) == {"local", "sandbox"} and info["backends"]["local"]["available"]
    assert "python" in info["languages"]
    assert info["limits"]["default"]["timeout_s"] == 60 and info["limits"]["maximum"]["network"] is False
    assert info["capabilities"]["max_upload_bytes"] == 1 << 20
    assert {"sessions", "running", "queued", "max_concurrency"} <= set(info["load"])


def test_openapi_describes_every_route():
    app = create_app(ServerConfig(backend="local"))
    paths = openapi()["paths"]
    served = {(method.lower(), path) for method, path in routes_of(app)}
    described = {(method, path) for path, ops in paths.items() for method in ops}
    assert served == {(m, p.replace("{path:path}", "{path}")) for m, p in described} or served == {
        (m, p.replace("{path}", "{path:path}")) for m, p in described
    }


def test_openapi_is_served(client):
    document = client.get("/openapi.json").json()
    assert document["openapi"].startswith("3.") and "/v1/run" in document["paths"]


def test_run_returns_the_result(client):
    result = client.post("/v1/run", json={"language": "python", "code": "print(6 * 7)"}).json()
    assert result["exit_code"] == 0 and result["stdout"] == "42\n" and result["backend"] == "local"


def test_run_blocks_files_and_fetch_files(client):
    binary = bytes(range(256))
    response = client.post(
        "/v1/run",
        json={
            "blocks": [
                {"code": "print(open('in.txt').read().upper())"},
                {"language": "sh", "code": "cp in.bin out.bin; echo done > out.txt"},
            ],
            "files": {
                "in.txt": {"content": "hello"},
                "in.bin": {"content": base64.b64encode(binary).decode(), "encoding": "base64"},
            },
            "fetch_files": ["out.txt", "out.bin", "missing.txt"],
        },
    )
    result = response.json()
    assert result["exit_code"] == 0 and result["stdout"] == "HELLO\n", result
    assert len(result["blocks"]) == 2
    contents = result["file_contents"]
    assert contents["out.txt"] == {"content": "done\n", "encoding": "utf-8"}
    assert (
        contents["out.bin"]["encoding"] == "base64"
        and base64.b64decode(contents["out.bin"]["content"]) == binary
    )
    assert "error" in contents["missing.txt"]


def test_each_run_has_a_fresh_workspace(client):
    client.post("/v1/run", json={"code": "open('left.txt', 'w').write('x')"})
    result = client.post("/v1/run", json={"code": "import os; print(sorted(os.listdir('.')))"}).json()
    assert "left.txt" not in result["stdout"]


def test_failing_code_is_a_result_not_an_error(client):
    result = client.post("/v1/run", json={"code": "1/0"}).json()
    assert result["exit_code"] != 0 and result["error"]["name"] == "ZeroDivisionError"


def test_run_on_the_sandbox(client, require_component):
    from execbox.backends.sandbox import find_bwrap

    require_component("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    for _ in range(2):  # the second one on the kept executor, in an emptied workspace
        result = client.post(
            "/v1/run",
            json={
                "backend": "sandbox",
                "code": "import os; print(sorted(os.listdir('.')))",
                "files": {"a.txt": "x"},
            },
        ).json()
        assert result["backend"] == "sandbox" and result["stdout"] == "['.execbox', 'a.txt']\n", result


def test_info_shows_the_warm_pool_of_each_executor_kept(client, require_component):
    from execbox.backends.sandbox import find_bwrap

    before = client.get("/v1/info").json()["pools"]
    assert all(pool["backend"] == "sandbox" for pool in before)  # the local backend keeps no pool
    require_component("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    assert client.post("/v1/run", json={"backend": "sandbox", "code": "print(1)"}).json()["stdout"] == "1\n"
    pools = client.get("/v1/info").json()["pools"]
    kept = [pool for pool in pools if pool["use"] == "idle"]
    assert kept and all(pool["backend"] == "sandbox" for pool in pools)
    assert {"boxes", "boxes_ready", "boxes_made", "boxes_replaced", "refills_failed", "stalls"} <= set(
        kept[0]["health"]
    ), kept
    assert kept[0]["health"]["boxes_made"] >= 1


@pytest.mark.parametrize(
    "body, code",
    [
        (b"{not json", "bad_request"),
        (b"[1, 2]", "bad_request"),
        (json.dumps({"language": "python"}).encode(), "bad_request"),
        (json.dumps({"code": "1", "blocks": [{"code": "2"}]}).encode(), "bad_request"),
        (json.dumps({"code": 5}).encode(), "bad_request"),
        (json.dumps({"code": "1", "backend": "docker"}).encode(), "bad_request"),
        (json.dumps({"code": "1", "limits": {"timeout_s": -1}}).encode(), "invalid_limits"),
        (json.dumps({"code": "1", "limits": {"timeout_s": 10_000}}).encode(), "invalid_limits"),
        (json.dumps({"code": "1", "limits": {"network": True}}).encode(), "invalid_limits"),
        (json.dumps({"code": "1", "limits": {"wall": 1}}).encode(), "invalid_limits"),
        (
            json.dumps({"code": "1", "files": {"a": {"content": "@@", "encoding": "base64"}}}).encode(),
            "bad_request",
        ),
        (json.dumps({"code": "1", "files": {"../x": "y"}}).encode(), "path_escape"),
    ],
)
def test_bad_run_requests_are_400(client, body, code):
    error_of(client.post("/v1/run", content=body, headers={"Content-Type": "application/json"}), 400, code)


def test_a_body_over_the_limit_is_413(client):
    error_of(client.post("/v1/run", json={"code": "#" * (2 << 20)}), 413, "too_large")


def test_unknown_route_404_and_wrong_method_405(client):
    error_of(client.get("/v1/nothing"), 404, "not_found")
    error_of(client.get("/v1/run"), 405, "method_not_allowed")


def test_batch_streams_one_line_per_request_with_its_index(client):
    requests = [
        {"code": "import time; time.sleep(1.0); print('slow')"},
        {"code": "print('fast')"},
        {"code": "1/0"},
        {"language": "python"},
    ]
    with client.stream("POST", "/v1/batch", json={"requests": requests, "max_concurrency": 4}) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert sorted(line["index"] for line in lines) == [0, 1, 2, 3]
    assert lines[-1]["index"] == 0  # the slow one finished last
    by_index = {line["index"]: line for line in lines}
    assert by_index[1]["stdout"] == "fast\n" and by_index[2]["exit_code"] != 0
    assert by_index[3]["error"]["code"] == "bad_request"


def test_batch_needs_requests(client):
    error_of(client.post("/v1/batch", json={"requests": []}), 400, "bad_request")
