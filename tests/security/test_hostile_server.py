"""The client facing a hostile or broken server (issue 27): every answer of
``execbox serve`` is the attacker's (its sizes, its JSON, its timing, its
redirects). Each test is an attack written as the server would make it, on
a real HTTP server on loopback (``_hostile_server``), judged from the
client's side: a clear ``ServiceError`` naming what the server did and
what to change, or a bounded result; within a deadline (a thread joined
with a liveness bound far past the client's own timeouts, never a speed
check); the token never sent to another origin. The streams and the
remote executor's mirror are in ``test_hostile_streams``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from execbox import Client, ServiceError
from tests.security._hostile_server import INFO, HostileServer, Reply, hostile_server

pytest.importorskip("httpx")

TOKEN = "t0ken-of-the-real-server"
HANG_S = 30.0  # a liveness bound: the client's own timeouts in these tests are 1 to 2 s


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with hostile_server() as made:
        yield made


@pytest.fixture
def other() -> Iterator[HostileServer]:
    """Another origin (another port), where a redirect points."""
    with hostile_server() as made:
        made.route("GET", "/v1/info", lambda r: r.json(INFO))
        made.route("POST", "/v1/run", lambda r: r.json({"exit_code": 0, "output": "stolen"}))
        yield made


def within(call: Callable[[], Any], hang_s: float = HANG_S) -> Any:
    """``call()``'s result, or the exception it raised; fails the test
    instead of hanging it if it has not returned after ``hang_s``."""
    done: list[Any] = []

    def work() -> None:
        try:
            done.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test, whatever it is
            done.append(exc)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(hang_s)
    assert done, f"the client did not return within {hang_s:.0f} s: it waits on the server without a deadline"
    return done[0]


def refused(call: Callable[[], Any], code: str) -> ServiceError:
    outcome = within(call)
    assert isinstance(outcome, ServiceError), f"expected a ServiceError ({code}), got {outcome!r:.300}"
    assert outcome.code == code, outcome
    return outcome


def client(server: HostileServer, **options: Any) -> Client:
    return Client(server.url, token=TOKEN, timeout_s=options.pop("timeout_s", 2.0), **options)


# --- sizes -------------------------------------------------------------------------------------------------------


def test_an_answer_announcing_10_gb_is_refused_before_it_is_read(server):
    def huge(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json", "Content-Length": str(10 * 1024**3)})
        reply.write(b'{"version": "' + b"x" * 65536)
        reply.stall()

    server.route("GET", "/v1/info", huge)
    error = refused(client(server).info, "too_large")
    assert "10737418240" in error.message and "max_answer_bytes" in error.message


def test_an_endless_answer_is_cut_at_max_answer_bytes(server):
    def endless(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json"})  # no length: read until the connection ends
        reply.write(b'{"version": "')
        reply.forever(b"x" * 65536)

    server.route("GET", "/v1/info", endless)
    error = refused(client(server, max_answer_bytes=1024 * 1024).info, "too_large")
    assert "1048576" in error.message and "Client(max_answer_bytes=...)" in error.message


def test_an_error_answer_is_bounded_too(server):
    def endless(reply: Reply) -> None:
        reply.head(500, {"Content-Type": "text/html"})
        reply.forever(b"<p>" * 65536)

    server.route("POST", "/v1/run", endless)
    refused(lambda: client(server, max_answer_bytes=1024 * 1024).run("print(1)"), "too_large")


def test_a_gzip_bomb_is_cut_at_max_answer_bytes(server):
    import gzip

    bomb = gzip.compress(b'{"version": "' + b"0" * (64 * 1024 * 1024) + b'"}')  # 64 MiB in about 64 KiB

    def inflating(reply: Reply) -> None:
        reply.head(
            200,
            {
                "Content-Type": "application/json",
                "Content-Encoding": "gzip",
                "Content-Length": str(len(bomb)),
            },
        )
        reply.write(bomb)

    server.route("GET", "/v1/info", inflating)
    refused(client(server, max_answer_bytes=1024 * 1024).info, "too_large")


# --- timing ------------------------------------------------------------------------------------------------------


def test_an_answer_dripped_a_byte_at_a_time_ends_by_timeout_s(server):
    def drip(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json"})
        reply.write(b'{"version": "')
        reply.forever(b"x", every_s=0.05)  # each read well inside timeout_s: only a whole deadline ends it

    server.route("GET", "/v1/info", drip)
    error = refused(client(server, timeout_s=1.0).info, "timeout")
    assert "Client(timeout_s=...)" in error.message


def test_a_run_answer_dripped_forever_ends_by_run_timeout_s(server):
    def drip(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json"})
        reply.forever(b" ", every_s=0.05)

    server.route("POST", "/v1/run", drip)
    error = refused(lambda: client(server, run_timeout_s=1.0).run("print(1)"), "timeout")
    assert "Client(run_timeout_s=...)" in error.message


def test_an_answer_that_stalls_mid_body_ends_by_timeout_s(server):
    def stall(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json", "Content-Length": "100"})
        reply.write(b'{"version": ')
        reply.stall()

    server.route("GET", "/v1/info", stall)
    error = refused(client(server, timeout_s=1.0).info, "timeout")
    assert "Client(timeout_s=...)" in error.message


# --- JSON and its shapes -----------------------------------------------------------------------------------------


def test_json_nested_too_deep_is_a_bad_answer_not_a_recursion_error(server):
    server.route(
        "GET",
        "/v1/info",
        lambda r: (
            r.head(200, {"Content-Type": "application/json"}) or r.write(b"[" * 200_000 + b"]" * 200_000)
        ),
    )
    error = refused(client(server).info, "bad_answer")
    assert "nested too deep" in error.message


def test_an_error_nested_too_deep_is_still_the_status_error(server):
    server.route(
        "GET",
        "/v1/info",
        lambda r: (
            r.head(502, {"Content-Type": "application/json"}) or r.write(b'{"error": ' + b"[" * 200_000)
        ),
    )
    error = refused(client(server).info, "http_502")
    assert error.status == 502


def test_json_that_is_not_an_object_is_a_bad_answer(server):
    server.route("GET", "/v1/info", lambda r: r.json(["not", "an", "object"]))
    error = refused(client(server).info, "bad_answer")
    assert "not an object" in error.message


def test_a_page_of_html_is_a_bad_answer_naming_the_server(server):
    server.route(
        "GET",
        "/v1/info",
        lambda r: (
            r.head(200, {"Content-Type": "text/html", "Content-Length": "13"}) or r.write(b"<html>hi</ht>")
        ),
    )
    error = refused(client(server).info, "bad_answer")
    assert "not JSON" in error.message and "execbox serve" in error.message


def test_a_run_result_of_the_wrong_types_is_a_bad_answer_naming_the_field(server):
    server.route(
        "POST", "/v1/run", lambda r: r.json({"exit_code": "0; rm -rf /", "output": 5, "files": "/etc/passwd"})
    )
    error = refused(lambda: client(server).run("print(1)"), "bad_answer")
    assert "'exit_code' must be an integer" in error.message


@pytest.mark.parametrize(
    "answer, named",
    [
        ({"language": "c"}, "'verdict'"),
        ({"verdict": "accepted", "language": "c", "passed": "all"}, "'passed' must be an integer"),
        ({"verdict": "accepted", "language": "c", "cases": "none"}, "'cases' must be a list"),
        ({"verdict": "accepted", "language": "c", "cases": [{"index": 0}]}, "case 0"),
        (
            {"verdict": "accepted", "language": "c", "cases": [{"index": 0, "verdict": "ok", "time_s": -1}]},
            "'time_s'",
        ),
        (
            {
                "verdict": "ok",
                "language": "c",
                "cases": [{"index": 0, "verdict": "ok", "peak_memory_mb": "9"}],
            },
            "'peak_memory_mb'",
        ),
    ],
)
def test_a_judge_answer_of_the_wrong_shape_is_a_bad_answer_naming_the_field(server, answer, named):
    server.route("POST", "/v1/judge", lambda r: r.json(answer))
    error = refused(lambda: client(server).judge("x", "c", [{}]), "bad_answer")
    assert named in error.message


@pytest.mark.parametrize(
    "field, value",
    [
        ("duration_s", -1),
        ("duration_s", 1e400),
        ("exit_code", 10**30),
        ("files", ["ok", 7]),
        ("blocks", [{"exit_code": 0}]),
    ],
)
def test_a_run_result_with_impossible_numbers_or_shapes_is_a_bad_answer(server, field, value):
    shown = "Infinity" if value == 1e400 else json.dumps(value)  # Infinity: what json.loads takes
    body = f'{{"exit_code": 0, "output": "", "{field}": {shown}}}'.encode()
    server.route(
        "POST",
        "/v1/run",
        lambda r: (
            r.head(200, {"Content-Type": "application/json", "Content-Length": str(len(body))})
            or r.write(body)
        ),
    )
    error = refused(lambda: client(server).run("print(1)"), "bad_answer")
    assert field in error.message or "block 0" in error.message


def test_a_session_whose_id_would_reroute_later_requests_is_refused(server):
    server.route("POST", "/v1/sessions", lambda r: r.json({"id": "../../v1/admin?x=", "key": "k" * 32}))
    error = refused(lambda: client(server).session(), "bad_answer")
    assert "is not an id" in error.message
    assert len(server.seen) == 1  # nothing sent to the path it named


def test_a_session_answer_without_an_id_is_a_bad_answer_not_a_key_error(server):
    server.route("POST", "/v1/sessions", lambda r: r.json({"key": "k" * 32}))
    refused(lambda: client(server).session(), "bad_answer")


def test_a_batch_line_with_a_forged_index_is_a_bad_answer(server):
    def lines(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/x-ndjson"})
        reply.write(b'{"index": 99, "exit_code": 0, "output": ""}\n')

    server.route("POST", "/v1/batch", lines)
    error = refused(lambda: list(client(server).batch(["print(1)"])), "bad_answer")
    assert "index" in error.message


def test_a_batch_line_without_end_is_cut_at_max_answer_bytes(server):
    def endless(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/x-ndjson"})
        reply.forever(b"x" * 65536)

    server.route("POST", "/v1/batch", endless)
    refused(lambda: list(client(server, max_answer_bytes=1024 * 1024).batch(["print(1)"])), "too_large")


# --- redirects ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_to_another_origin_is_not_followed_and_the_token_stays_home(server, other, status):
    server.route(
        "POST",
        "/v1/run",
        lambda r: r.head(status, {"Location": f"{other.url}/v1/run", "Content-Length": "0"}),
    )
    error = refused(lambda: client(server).run("print('secret code')"), "redirect")
    assert other.seen == []  # neither the token, nor the code, nor any request
    assert f"{other.url}/v1/run" in error.message and "Client(base_url=...)" in error.message


def test_a_redirect_to_a_file_url_reads_nothing_here(server):
    server.route(
        "GET", "/v1/info", lambda r: r.head(302, {"Location": "file:///etc/passwd", "Content-Length": "0"})
    )
    error = refused(client(server).info, "redirect")
    assert "root:" not in error.message and "file:///etc/passwd" in error.message


def test_a_redirect_loop_is_one_request(server):
    server.route("GET", "/v1/info", lambda r: r.head(307, {"Location": "/v1/info", "Content-Length": "0"}))
    refused(client(server).info, "redirect")
    assert len(server.requests_to("GET", "/v1/info")) == 1


def test_a_redirected_stream_sends_no_token_elsewhere(server, other):
    server.session_routes()
    server.route(
        "POST",
        "/v1/sessions/s_hostile/executions",
        lambda r: r.head(307, {"Location": f"{other.url}/steal", "Content-Length": "0"}),
    )
    with client(server) as made:
        session = made.session()
        error = refused(lambda: list(session.stream("print(1)")), "redirect")
    assert other.seen == [] and "/steal" in error.message


# --- what the server says about itself ---------------------------------------------------------------------------


@pytest.mark.parametrize("retry_after", ["inf", "1e308", "-5", "nan"])
def test_a_retry_after_that_would_have_the_caller_sleep_forever_is_bounded(server, retry_after):
    server.route(
        "POST",
        "/v1/run",
        lambda r: r.json({"error": {"code": "busy", "message": "full"}}, 429, {"Retry-After": retry_after}),
    )
    error = refused(lambda: client(server).run("print(1)"), "busy")
    assert (
        error.retry_after is None or 0 <= error.retry_after <= 300
    )  # execbox.client._wire.MAX_RETRY_AFTER_S


def test_an_error_message_of_megabytes_is_cut(server):
    server.route(
        "GET", "/v1/info", lambda r: r.json({"error": {"code": "internal", "message": "A" * 5_000_000}}, 500)
    )
    error = refused(client(server).info, "internal")
    assert len(error.message) <= 10_000  # the cap: execbox.client._wire.MAX_MESSAGE_CHARS


def test_the_remote_executor_reads_capabilities_of_the_wrong_shape_as_none(server, tmp_path):
    from execbox.backends.remote import RemoteExecutor

    server.route(
        "GET", "/v1/info", lambda r: r.json({"default_backend": ["x"], "backends": {"['x']": "sandbox"}})
    )
    executor = RemoteExecutor(server.url, token=TOKEN, timeout_s=2.0, workspace=str(tmp_path))
    try:
        capabilities = within(lambda: executor.capabilities)  # asked before a session is opened
    finally:
        executor.close()
    assert not isinstance(capabilities, BaseException), capabilities
    assert capabilities.languages == () and capabilities.isolated is False
