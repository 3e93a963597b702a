"""The API fuzzed against its own document: schemathesis reads the
document the server serves (``/openapi.json``) and sends every operation
generated bodies, parameters and headers (valid ones and not), over
loopback only.

Checked on every answer: never a 5xx; every error in the one shape
(``{"error": {"code", "message", "retryable"}}``, as JSON); the status,
content type, headers (Retry-After) and body as the document says
(schemathesis' checks: a status the document does not list fails; each
server-sent event against the event schema), NDJSON lines against theirs;
and the token refused when it is left out. The two streaming operations
are asked for JSON, server-sent events and NDJSON in turn.

The server runs the local backend with small limits (2 s per block, 1 MiB
bodies), so generated code can neither hang it nor fill the disk. Path
ids are mostly real ones (an open session with an execution, a file and a
folder), so that the routes behind the 404 are fuzzed too.

What the generator never makes (lone surrogates, ``NaN``, deep nesting,
``%2E``) is sent by hand in ``test_hostile_requests_are_refused_in_the_shape``.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import REQUIRE_ALL

if (
    importlib.util.find_spec("schemathesis") is None and not REQUIRE_ALL
):  # under EXECBOX_REQUIRE=all: the import fails
    pytest.skip(
        "schemathesis is not installed: pip install -e '.[dev]' (./dev.sh does)", allow_module_level=True
    )

import jsonschema_rs
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from execbox.server._openapi import openapi
from tests.server._http import KEY_HEADER, Server, error_of, running_server

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# Per operation and phase; the whole file takes about 15 s on 2 cores (FUZZ_EXAMPLES=200 for a longer hunt).
EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "30"))
KNOWN_PATHS = ("a.txt", "d", "d/b.txt", "a.txt/x", "d/", "./a.txt", "nothing.txt")
DOCUMENT = openapi()
STREAMED = {"/v1/sessions/{sid}/executions", "/v1/sessions/{sid}/executions/{eid}/events"}
ACCEPTS = itertools.cycle(["application/json", "text/event-stream", "application/x-ndjson"])

# Left out: a request of the documented shape may still be refused for what it means
# (a path that climbs out, a timeout of 0, a folder not empty: a documented 400), and
# the server is lenient where the document is not strict: null is an absent field,
# unknown query parameters are ignored, a batch answers a bad request in its own line.
EXCLUDED = [positive_data_acceptance, negative_data_rejection]


@pytest.fixture(scope="module")
def fuzzed_server() -> Iterator[Server]:
    with running_server(
        "--backend",
        "local",
        "--timeout",
        "2",
        "--max-timeout",
        "2",
        "--max-upload-mb",
        "1",
        "--max-concurrency",
        "4",
        "--max-sessions",
        "16",
        "--session-ttl",
        "60",
        "--idle-ttl",
        "60",
        "--max-session-ttl",
        "120",
        "--sse-keepalive",
        "0.2",
        token=TOKEN,
    ) as running:
        yield running


class Ids:
    """A live session (re-opened when the fuzzer deleted or reset it away)
    with one finished execution, a file ``a.txt`` and a folder ``d``."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client
        self.sid = ""
        self.eid = ""

    def live(self) -> tuple[str, str]:
        if not self.sid or self.client.get(f"/v1/sessions/{self.sid}").status_code != 200:
            made = self.client.post("/v1/sessions", json={"ttl_s": 60})
            assert made.status_code == 201, made.text
            self.sid = made.json()["id"]
            ran = self.client.post(f"/v1/sessions/{self.sid}/executions", json={"code": "print(1)"})
            assert ran.status_code == 200, ran.text
            self.eid = ran.json()["id"]
        for path, data in (("a.txt", b"hello"), ("d/b.txt", b"\xff\x00")):
            self.client.put(f"/v1/sessions/{self.sid}/files/{path}", content=data)
        return self.sid, self.eid


@pytest.fixture(scope="module")
def ids(fuzzed_server: Server) -> Iterator[Ids]:
    with fuzzed_server.client() as client:
        yield Ids(client)


def error_shape(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every answer of 400 or more is JSON in the one error shape."""
    if response.status_code < 400:
        return None
    assert response.headers.get("content-type", [""])[0].startswith("application/json"), response.headers
    body = json.loads(response.content)
    assert set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], body
    assert isinstance(error.get("message"), str) and error["message"], body
    assert isinstance(error.get("retryable"), bool), body
    assert set(error) <= {"code", "message", "retryable", "reason"}, body
    return None


def ndjson_lines(ctx: Any, response: Any, case: Any) -> bool | None:
    """Each NDJSON line (a batch's, an execution's events) as the document says."""
    media = response.headers.get("content-type", [""])[0].split(";")[0]
    if response.status_code != 200 or media != "application/x-ndjson":
        return None
    schema = DOCUMENT["paths"][case.path][case.method.lower()]["responses"]["200"]["content"][media]["schema"]
    validator = jsonschema_rs.validator_for({**schema, "components": DOCUMENT["components"]})
    for line in response.content.splitlines():
        if line.strip():
            validator.validate(json.loads(line))
    return None


def _real_ids(case: Any, ids: Ids) -> None:
    """Three cases in four use the live session (and its execution, and a
    known file name); the fourth keeps what was generated."""
    params = case.path_parameters or {}
    if "sid" not in params or len(str(params["sid"])) % 4 == 3:
        return
    sid, eid = ids.live()
    params["sid"] = sid
    if "eid" in params and len(str(params["eid"])) % 4 != 3:
        params["eid"] = eid
    if "path" in params and len(str(params["path"])) % 2 == 0:
        params["path"] = KNOWN_PATHS[len(str(params["path"])) % len(KNOWN_PATHS)]


# The document the server serves (test_served_document_is_the_fuzzed_one); schemathesis' lazy
# from_fixture loader, which would fetch it, does not run on pytest 9 (it sets Function._nodeid).
schema = schemathesis.openapi.from_dict(DOCUMENT)


def test_served_document_is_the_fuzzed_one(fuzzed_server: Server) -> None:
    with fuzzed_server.client() as client:
        assert client.get("/openapi.json").json() == json.loads(json.dumps(DOCUMENT))


@schema.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_answers_as_documented(case: Any, fuzzed_server: Server, ids: Ids) -> None:
    _real_ids(case, ids)
    headers = {**AUTH, "Accept": next(ACCEPTS)} if case.path in STREAMED else dict(AUTH)
    sid = (case.path_parameters or {}).get("sid")
    if sid in fuzzed_server.keys:  # the live session: its key (others': a documented 403)
        headers[KEY_HEADER] = fuzzed_server.keys[sid]
    response = case.call(base_url=fuzzed_server.url, headers=headers, timeout=15)
    if response.status_code == 400 and response.content == b"Invalid HTTP request received.":
        return  # uvicorn's HTTP parser refused what was generated before execbox's app saw it
    case.validate_response(
        response, additional_checks=[error_shape, ndjson_lines], excluded_checks=EXCLUDED, headers=headers
    )
    if case.method == "POST" and case.path == "/v1/sessions" and response.status_code == 201:
        made = response.json()
        with fuzzed_server.client() as client:  # free the slot for the next cases
            client.delete(f"/v1/sessions/{made['id']}", headers={KEY_HEADER: made["key"]})


# (method, path under /v1 ({sid}, {eid}: the live session's), body, status, error code). Found by
# hand or by the fuzzer; each was a 500 (or a wrong code) before.
HOSTILE = [
    ("POST", "/run", b'{"code": "\\ud800"}', 400, "bad_request"),  # a lone surrogate: a 500, then a reset
    ("POST", "/run", b'{"blocks": [{"code": "1", "filename": "\\udc00.py"}]}', 400, "bad_request"),
    ("POST", "/run", b'{"code": "1", "files": {"a": {"content": "\\ud800"}}}', 400, "bad_request"),
    ("POST", "/run", b'{"code": "1", "fetch_files": ["\\ud800"]}', 400, "bad_request"),
    ("POST", "/run", b'{"code": "1", "limits": {"timeout_s": NaN}}', 400, "bad_request"),
    ("POST", "/run", b"[" * 50_000, 400, "bad_request"),  # a RecursionError
    ("POST", "/run", b'{"code": "1", "limits": {"timeout_s": true}}', 400, "invalid_limits"),  # was 1 s
    ("POST", "/run", b'{"code": "1", "files": {".": "x"}}', 400, "bad_request"),  # a ValueError
    ("POST", "/run", b'{"code": "print(1)", "language": null}', 200, None),
    (
        "POST",
        "/batch",
        b'{"requests": [{"code": "1"}], "max_concurrency": 0}',
        400,
        "bad_request",
    ),  # was ignored
    ("POST", "/sessions", b'{"idle_ttl_s": null}', 201, None),  # a TypeError
    ("PUT", "/sessions/{sid}/files/a.txt/x", b"x", 400, "workspace_error"),  # was path_escape
    ("GET", "/sessions/{sid}/files/a.txt/x", None, 400, "workspace_error"),  # was 404
    ("GET", "/sessions/{sid}/files?path=a.txt", None, 400, "workspace_error"),  # was path_escape
    ("PUT", "/sessions/{sid}/files/%2E", b"x", 400, "bad_request"),  # a ValueError
    ("GET", "/sessions/{sid}/executions/{eid}/events?after=%C2%B2", None, 400, "bad_request"),  # int('²')
    ("POST", "/sessions", b'{"env": {"A": "\\u0000"}}', 400, "bad_request"),  # then every execution a 500
    ("POST", "/sessions", b'{"env": {"A=B": "x"}}', 400, "bad_request"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), HOSTILE)
def test_hostile_requests_are_refused_in_the_shape(
    fuzzed_server: Server, ids: Ids, method: str, path: str, body: bytes | None, status: int, code: str | None
) -> None:
    sid, eid = ids.live()
    url = "/v1" + path.replace("{sid}", sid).replace("{eid}", eid)
    with fuzzed_server.client() as client:
        response = client.request(method, url, content=body, headers={"Content-Type": "application/json"})
        try:
            if code is not None:
                error_of(response, status, code)
            else:
                assert response.status_code == status, response.text
        finally:
            if response.status_code == 201 and path == "/sessions":
                client.delete(f"/v1/sessions/{response.json()['id']}")


def test_a_405_names_every_method_of_the_path(fuzzed_server: Server, ids: Ids) -> None:
    sid, _ = ids.live()
    with fuzzed_server.client() as client:
        for url, methods in (
            (f"/v1/sessions/{sid}/files/a.txt", {"GET", "PUT", "DELETE"}),
            (f"/v1/sessions/{sid}", {"GET", "DELETE"}),
        ):
            response = client.request("OPTIONS", url)
            assert response.status_code == 405
            assert methods <= {m.strip() for m in response.headers["Allow"].split(",")}, response.headers
