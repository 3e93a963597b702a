"""``/run_code`` on a server that takes a token: veRL's reward client sends
only a URL (its ``sandbox_fusion.url``, posted to as given), so the token
rides in it, ``/t/<token>/run_code``, the URL ``execbox serve`` prints.
Every other route still takes the token only as ``Authorization: Bearer``;
a wrong token in the URL is told so as a wrong one in the header is; the
token is never in the server's log beyond its start-up lines."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from urllib.parse import quote

import httpx
import pytest
import requests

from tests.server._http import Server, error_of, running_server

VERL_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


def verl_post(url: str, code: str = "print(6 * 7)") -> requests.Response:
    """A POST as veRL's ``call_sandbox_api`` makes it: ``requests`` to the configured URL, as given."""
    body = {
        "compile_timeout": 10,
        "run_timeout": 10,
        "code": code,
        "stdin": "",
        "memory_limit_MB": 1024,
        "language": "python",
        "files": {},
        "fetch_files": [],
    }
    return requests.post(url, headers=VERL_HEADERS, data=json.dumps(body), timeout=60)


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Started as a person starts it (its token made and printed), logging every request."""
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with running_server(
        "--backend", "local", "--log-level", "info", token="", log=log, access_log=True
    ) as running:
        yield running


def printed_run_code_url(log: str) -> str:
    found = re.findall(r"sandbox_fusion\.url=(http://\S+/run_code)\b", log)
    assert len(found) == 1, log
    return found[0]


def test_the_printed_url_works_in_verl_unchanged(made: Server) -> None:
    url = printed_run_code_url(made.log_text())
    assert url == f"{made.url}/t/{made.token}/run_code"
    answer = verl_post(url)
    assert answer.status_code == 200, answer.text
    got = answer.json()
    assert got["status"] == "Success" and got["run_result"]["stdout"] == "42\n"


def test_a_wrong_token_in_the_url_is_told_as_one_in_the_header(made: Server) -> None:
    wrong = made.token[:-1] + ("A" if made.token[-1] != "A" else "B")
    in_url = error_of(verl_post(f"{made.url}/t/{wrong}/run_code"), 401, "unauthorized")  # type: ignore[arg-type]
    with httpx.Client(base_url=made.url) as bare:
        said = bare.post(
            "/run_code",
            json={"code": "1", "language": "python"},
            headers={"Authorization": f"Bearer {wrong}"},
        )
        in_header = error_of(said, 401, "unauthorized")
    assert in_url["message"] == in_header["message"] and "not this server's" in in_url["message"]
    assert "/t/<token>/run_code" in in_url["message"]  # says where the URL form goes
    empty = error_of(verl_post(f"{made.url}/t//run_code"), 401, "unauthorized")  # type: ignore[arg-type]
    assert "required" in empty["message"]


def test_other_routes_take_the_token_only_in_the_header(made: Server) -> None:
    with httpx.Client(base_url=made.url) as bare:
        for method, path in (("POST", "/v1/run"), ("GET", "/v1/info"), ("POST", "/v1/judge")):
            error_of(bare.request(method, f"/t/{made.token}{path}", json={"code": "1"}), 401, "unauthorized")
        error_of(bare.post("/run_code", json={"code": "1", "language": "python"}), 401, "unauthorized")
        assert bare.get("/openapi.json").status_code == 200  # open, as before
        assert bare.get(f"/t/{made.token}/run_code").status_code == 405  # the route, by POST only
    with made.client() as client:  # the header still opens /run_code and the rest
        done = client.post("/run_code", json={"code": "print(1)", "language": "python"})
        assert done.status_code == 200 and done.json()["status"] == "Success"
        assert client.post("/v1/run", json={"code": "print(2)"}).json()["stdout"] == "2\n"


def test_the_token_is_never_logged(made: Server) -> None:
    wrong = "W" * len(made.token)
    assert verl_post(f"{made.url}/t/{made.token}/run_code").status_code == 200
    assert verl_post(f"{made.url}/t/{wrong}/run_code").status_code == 401
    assert verl_post(f"{made.url}/t/{made.token}/v1/run").status_code == 401  # the wrong route's URL too
    log = made.log_text()
    started = [line for line in log.splitlines() if made.token in line]
    assert len(started) == 2, log  # the playground's link and the /run_code URL, printed once at start
    assert all("?token=" in line or "sandbox_fusion.url=" in line for line in started)
    assert wrong not in log
    assert '"POST /t/redacted/run_code HTTP/1.1" 200' in log  # the access log says it came, without it
    assert '"POST /t/redacted/run_code HTTP/1.1" 401' in log
    assert '"POST /t/redacted/v1/run HTTP/1.1" 401' in log


def test_a_given_token_with_url_characters_is_taken_percent_encoded() -> None:
    token = "a/b%c?d#e&f"
    with running_server("--backend", "local", token=token) as server:
        answer = verl_post(f"{server.url}/t/{quote(token, safe='')}/run_code")
        assert answer.status_code == 200, answer.text
        assert answer.json()["run_result"]["stdout"] == "42\n"
        assert verl_post(f"{server.url}/t/a/b%25c%3Fd%23e%26f/run_code").status_code == 401


def test_without_a_token_the_plain_url_is_printed_and_a_url_token_is_not_needed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "server.log"
    with running_server("--backend", "local", "--no-token", log=log) as server:
        assert printed_run_code_url(server.log_text()) == f"{server.url}/run_code"
        assert verl_post(f"{server.url}/run_code").json()["status"] == "Success"
