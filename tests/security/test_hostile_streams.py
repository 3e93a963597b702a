"""A hostile server's run streams and workspace files (issue 27), against
``Session.stream`` and the ``remote`` executor: streams that never end or
never end a line, forged and out-of-order events, events of the wrong
shape, and files named to climb out of the local workspace, through a
link, or too big and too many. Judged from the host: a clear
``ServiceError`` (or the executor's error) within a deadline, or a bounded
result; nothing written outside the local workspace.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from execbox import CodeBlock, ExecboxError, Limits, ServiceError, Workspace
from execbox.backends._file_sync import MAX_PULLED_FILES
from execbox.backends.remote import RemoteExecutor
from tests.security._hostile_server import (
    EXECUTION,
    EXECUTIONS,
    SESSION,
    SESSIONS,
    HostileServer,
    Reply,
    hostile_server,
    result,
    run_events,
)
from tests.security.test_hostile_server import TOKEN, client, refused, within

pytest.importorskip("httpx")


@pytest.fixture
def server() -> Iterator[HostileServer]:
    with hostile_server() as made:
        made.session_routes()
        yield made


def stream(server: HostileServer, **options: Any) -> Callable[[], list[Any]]:
    def read() -> list[Any]:
        with client(server, **options) as made:
            return list(made.session().stream("print(1)"))

    return read


def remote(server: HostileServer, folder: Path, **options: Any) -> RemoteExecutor:
    """A remote executor on the hostile server; a block may take 1 s there
    (so that its run's deadline, ``run_deadline``, is 2 + 2 s)."""
    return RemoteExecutor(
        server.url,
        token=TOKEN,
        timeout_s=2.0,
        workspace=Workspace(folder / "ws"),
        limits=Limits(timeout_s=1.0),
        **options,
    )


# --- streams that never end ----------------------------------------------------------------------------------------


ENDLESS = {
    "keepalives": lambda r: r.forever(b": keepalive\n\n", every_s=0.05),
    "unknown events": lambda r: r.forever(b"event: novel\ndata: {}\n\n", every_s=0.01),
    "output": lambda r: r.forever(b'event: stdout\ndata: {"text": "y\\n", "block": 0}\n\n', every_s=0.01),
}


@pytest.mark.parametrize("kind", sorted(ENDLESS))
def test_a_stream_that_never_ends_ends_by_run_timeout_s(server, kind):
    server.route("POST", EXECUTIONS, lambda r: r.sse() or ENDLESS[kind](r))
    error = refused(stream(server, run_timeout_s=1.0), "timeout")
    assert "run_timeout_s" in error.message


def test_the_remote_executor_ends_a_never_ending_run_by_its_own_deadline_and_cancels_it(server, tmp_path):
    def started_then_endless(reply: Reply) -> None:
        reply.sse()
        reply.event("start", {"blocks": 1, "execution_id": EXECUTION}, 1)
        ENDLESS["keepalives"](reply)

    cancel = f"{EXECUTIONS}/{EXECUTION}/cancel"
    server.route("POST", EXECUTIONS, started_then_endless)
    server.route("POST", cancel, lambda r: r.json({"id": EXECUTION, "result": None}))
    with remote(server, tmp_path) as executor:
        outcome = within(lambda: executor.run(CodeBlock("python", "print(1)")))
    assert isinstance(outcome, ExecboxError) and "did not end in time" in str(outcome), outcome
    assert len(server.requests_to("POST", cancel)) == 1  # not left running on the server


def test_a_stream_line_that_never_ends_is_cut_at_max_answer_bytes(server):
    server.route("POST", EXECUTIONS, lambda r: r.sse() or r.write(b"data: ") or r.forever(b"x" * 4096, 0.001))
    error = refused(stream(server, max_answer_bytes=256 * 1024), "too_large")
    assert "262144" in error.message


def test_an_event_of_endless_data_lines_is_cut_at_max_answer_bytes(server):
    server.route("POST", EXECUTIONS, lambda r: r.sse() or r.forever(b"data: " + b"x" * 4096 + b"\n", 0.001))
    refused(stream(server, max_answer_bytes=256 * 1024), "too_large")


# --- forged events -------------------------------------------------------------------------------------------------


def test_a_stream_that_is_not_an_event_stream_is_a_bad_answer(server):
    server.route("POST", EXECUTIONS, lambda r: r.json({"id": EXECUTION, "result": result()}))
    error = refused(stream(server), "bad_answer")
    assert "text/event-stream" in error.message


def test_an_end_event_of_another_execution_is_refused(server):
    server.route(
        "POST",
        EXECUTIONS,
        lambda r: run_events(
            r, {"id": "e_someone_else", "status": "completed", "result": result(stdout="forged")}
        ),
    )
    error = refused(stream(server), "bad_answer")
    assert "e_someone_else" in error.message


def test_a_start_event_of_another_execution_is_refused(server):
    def forged(reply: Reply) -> None:
        reply.sse()
        reply.event("start", {"blocks": 1, "execution_id": "e_someone_else"}, 1)

    server.route("POST", EXECUTIONS, forged)
    refused(stream(server), "bad_answer")


def test_event_ids_that_go_back_are_refused(server):
    def backwards(reply: Reply) -> None:
        reply.sse()
        reply.event("stdout", {"text": "a", "block": 0}, 5)
        reply.event("stdout", {"text": "b", "block": 0}, 2)

    server.route("POST", EXECUTIONS, backwards)
    error = refused(stream(server), "bad_answer")
    assert "event id '2'" in error.message


def test_an_execution_id_that_would_reroute_the_resume_is_refused(server):
    server.route("POST", EXECUTIONS, lambda r: r.sse({"X-Execution-Id": "../../../v1/admin"}))
    error = refused(stream(server), "bad_answer")
    assert "is not an id" in error.message
    assert not [s for s in server.seen if "admin" in s.path]


@pytest.mark.parametrize(
    "kind, data",
    [
        ("stdout", {"text": 12, "block": 0}),
        ("stdout", {"text": "x", "block": "0; rm"}),
        ("start", {"blocks": "many"}),
        ("block_end", {"index": 0, "status": "ok", "exit_code": None}),
        ("display", {"mime_type": "image/png", "block": 0, "path": ["..", "..", "etc", "passwd"]}),
        ("truncated", {"after_bytes": "all of them"}),
        (
            "end",
            {
                "id": EXECUTION,
                "status": "completed",
                "result": {"exit_code": 0, "output": "", "files": "/etc"},
            },
        ),
        (
            "end",
            {
                "id": EXECUTION,
                "status": "completed",
                "result": {"exit_code": 0, "output": "", "duration_s": -5},
            },
        ),
        ("end", {"id": EXECUTION, "status": "completed", "result": [1, 2]}),
    ],
)
def test_an_event_of_the_wrong_shape_is_a_bad_answer_naming_it(server, kind, data):
    server.route("POST", EXECUTIONS, lambda r: r.sse() or r.event(kind, data, 1))
    error = refused(stream(server), "bad_answer")
    assert f"({kind!r})" in error.message


def test_the_remote_executor_reports_a_forged_result_as_an_error(server, tmp_path):
    server.route(
        "POST",
        EXECUTIONS,
        lambda r: run_events(
            r, {"id": EXECUTION, "status": "completed", "result": {"exit_code": "0", "output": []}}
        ),
    )
    with remote(server, tmp_path) as executor:
        outcome = within(lambda: executor.run(CodeBlock("python", "print(1)")))
    assert isinstance(outcome, ServiceError) and outcome.code == "bad_answer", outcome


# --- the remote executor's mirror: hostile names and sizes ---------------------------------------------------------


def run_writing(
    server: HostileServer, tmp_path: Path, names: list[str], file: Callable[[Reply], None], **options: Any
) -> tuple[Any, RemoteExecutor]:
    """A run whose result names ``names`` as written, each served by ``file``."""
    server.route(
        "POST",
        EXECUTIONS,
        lambda r: run_events(r, {"id": EXECUTION, "status": "completed", "result": result(files=names)}),
    )
    server.route("GET", f"{SESSIONS}/files/*", file)
    executor = remote(server, tmp_path, **options)
    try:
        return within(lambda: executor.run(CodeBlock("python", "print(1)"))), executor
    finally:
        executor.close()


def everything_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


def test_file_names_that_climb_out_are_never_written_outside_the_workspace(server, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "ws").mkdir()
    os.symlink(outside, tmp_path / "ws" / "link")  # a name that is a link, here
    names = [
        "../escape.txt",
        "../../escape.txt",
        str(tmp_path / "absolute.txt"),
        "/etc/passwd-x",
        "link/through.txt",
        "link",
        ".execbox/planted",
        "sub/../../up.txt",
        "~/home.txt",
    ]
    outcome, executor = run_writing(server, tmp_path, names, lambda r: r.json({"pwned": True}))
    assert not isinstance(outcome, BaseException), outcome
    assert everything_under(tmp_path) == {"ws", "ws/link", "outside"}, everything_under(tmp_path)
    assert set(names) <= set(executor.mirror_skipped)


def test_a_name_with_a_newline_stays_a_file_inside_the_workspace(server, tmp_path):
    outcome, _ = run_writing(server, tmp_path, ["a\nb.txt"], lambda r: r.json({"fine": True}))
    assert not isinstance(outcome, BaseException), outcome
    assert everything_under(tmp_path) == {"ws", "ws/a\nb.txt"}


def test_a_file_body_longer_than_announced_is_cut_at_what_was_announced(server, tmp_path):
    def liar(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/octet-stream", "Content-Length": "10"})
        reply.write(b"0123456789" + b"EXTRA" * 100_000)

    outcome, _ = run_writing(server, tmp_path, ["out.bin"], liar)
    assert not isinstance(outcome, BaseException), outcome
    written = tmp_path / "ws" / "out.bin"
    assert not written.exists() or written.read_bytes() == b"0123456789"


@pytest.mark.parametrize("how", ["announced", "endless"])
def test_a_huge_file_is_skipped_not_held(server, tmp_path, how):
    def huge(reply: Reply) -> None:
        if how == "announced":
            reply.head(200, {"Content-Length": str(10 * 1024**3)})
            reply.write(b"x" * 65536)
            reply.stall()
        reply.head(200, {})
        reply.forever(b"x" * 65536)

    outcome, executor = run_writing(server, tmp_path, ["big.bin"], huge, max_answer_bytes=1024 * 1024)
    assert not isinstance(outcome, BaseException), outcome
    assert not (tmp_path / "ws" / "big.bin").exists() and executor.mirror_skipped == ["big.bin"]


def test_a_result_naming_thousands_of_files_fetches_at_most_max_pulled_files(server, tmp_path):
    names = [f"f{n}.txt" for n in range(MAX_PULLED_FILES + 500)]
    outcome, executor = run_writing(
        server, tmp_path, names, lambda r: r.json({"error": {"code": "not_found"}}, 404)
    )
    assert not isinstance(outcome, BaseException), outcome
    assert len([s for s in server.seen if s.method == "GET" and "/files/" in s.path]) == MAX_PULLED_FILES
    assert set(names[MAX_PULLED_FILES:]) <= set(executor.mirror_skipped)


def test_a_session_whose_times_are_not_times_reads_them_as_none(server):
    server.route(
        "POST",
        "/v1/sessions",
        lambda r: r.json(
            {"id": SESSION, "key": "k" * 32, "expires_at": "soon", "idle_expires_at": ["never"]}
        ),
    )
    with client(server) as made:
        session = within(made.session)
        assert not isinstance(session, BaseException), session
        assert session.expires_at is None and session.idle_expires_at is None


@pytest.mark.parametrize("how", ["stalls", "drips"])
def test_a_session_that_never_opens_ends_by_start_timeout_s(server, tmp_path, how):
    def never(reply: Reply) -> None:
        reply.head(200, {"Content-Type": "application/json"})
        if how == "stalls":
            reply.stall()
        reply.forever(b" ", every_s=0.05)

    server.route("POST", "/v1/sessions", never)
    executor = remote(server, tmp_path, start_timeout_s=1.0)
    try:
        outcome = within(executor.start)
    finally:
        executor.close()
    assert isinstance(outcome, ServiceError) and outcome.code == "timeout", outcome
    assert "RemoteExecutor(start_timeout_s=...)" in outcome.message
