"""execbox.Client's sessions against a real ``execbox serve``: typed
events in order, a stream resumed after a connection cut for real (a
relay between client and server), replay, cancel, files, reset, 409 and
queue, and 410 with its reason."""

from __future__ import annotations

import dataclasses
import importlib.util
import threading
import time

import pytest

from execbox import (
    BlockEndEvent,
    BlockStartEvent,
    Client,
    DisplayEvent,
    EndEvent,
    ExecutionGoneError,
    ExecutionResult,
    OutputEvent,
    ServiceError,
    SessionGoneError,
    StartEvent,
)
from tests.conftest import require
from tests.server._http import running_server
from tests.server._relay import Relay

LOOP = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n"
FOREVER = "print('looping', flush=True)\nwhile True:\n    pass"


@pytest.fixture
def api(server):
    with Client(server.url, server.token) as made:
        yield made


@pytest.fixture
def session(api):
    with api.session() as made:
        yield made


def comparable(result: ExecutionResult) -> ExecutionResult:
    """A result without what differs between two runs of the same code
    (times, the names of the code files)."""
    blocks = tuple(dataclasses.replace(b, duration_s=0.0, code_file=None) for b in result.blocks)
    return dataclasses.replace(result, duration_s=0.0, code_files=(), blocks=blocks)


def text_of(events: list, stream: str = "stdout") -> str:
    return "".join(e.text for e in events if isinstance(e, OutputEvent) and e.stream == stream)


def test_stream_yields_typed_events_in_order_and_ends_with_what_run_returns(session):
    code = LOOP + "import sys\nprint('oops', file=sys.stderr)\n"
    events = list(session.stream(code))
    start, end = events[0], events[-1]
    assert isinstance(start, StartEvent) and start.session_id == session.id and start.execution_id
    assert isinstance(end, EndEvent) and end.status == "completed"
    assert text_of(events) == "0\n1\n2\n" and text_of(events, "stderr") == "oops\n"
    kinds = [type(e) for e in events]
    assert (
        kinds.index(BlockStartEvent) < kinds.index(OutputEvent) < kinds.index(BlockEndEvent) < len(kinds) - 1
    )
    block_end = events[kinds.index(BlockEndEvent)]
    assert (block_end.index, block_end.language, block_end.status) == (0, "python", "ok")
    assert session.info()["executions"][-1] == start.execution_id
    assert comparable(end.result) == comparable(session.run(code))


def test_events_carry_their_block(session):
    events = list(
        session.stream(blocks=[{"code": "print('one')"}, {"language": "sh", "code": "echo two >&2; exit 4"}])
    )
    assert [(e.index, e.language) for e in events if isinstance(e, BlockStartEvent)] == [
        (0, "python"),
        (1, "sh"),
    ]
    outputs = [e for e in events if isinstance(e, OutputEvent)]  # a write may come in pieces
    assert {block: "".join(e.text for e in outputs if e.block == block) for block in (0, 1)} == {
        0: "one\n",
        1: "two\n",
    }
    assert {e.stream for e in outputs if e.block == 1} == {"stderr"}
    ends = [e for e in events if isinstance(e, BlockEndEvent)]
    assert [(e.index, e.status, e.exit_code) for e in ends] == [(0, "ok", 0), (1, "failed", 4)]
    assert events[-1].result.exit_code == 4


def test_a_stream_cut_for_real_resumes_from_the_last_id(server):
    with Relay(server.url) as relay, Client(relay.url, server.token) as client, client.session() as session:
        events = []
        for event in session.stream(LOOP):
            events.append(event)
            if isinstance(event, OutputEvent) and relay.severed == 0:
                relay.sever()  # the stream's connection is gone mid-run
        assert relay.severed >= 1
        assert isinstance(events[-1], EndEvent) and events[-1].result.stdout == "0\n1\n2\n"
        assert text_of(events) == "0\n1\n2\n"  # every event once: none lost, none repeated
        assert sum(isinstance(e, StartEvent) for e in events) == 1
        eid = events[0].execution_id
        assert f"GET /v1/sessions/{session.id}/executions/{eid}/events?after=".encode() in relay.sent
        assert b"last-event-id: " in relay.sent.lower()


def test_events_replays_after_an_id(session):
    events = list(session.stream(LOOP))
    eid = events[0].execution_id
    assert list(session.events(eid)) == events
    assert list(session.events(eid, after=2)) == events[2:]
    with pytest.raises(ServiceError) as missing:
        list(session.events("e_none"))
    assert (missing.value.status, missing.value.code) == (404, "not_found")


def test_cancel_stops_a_looping_stream(session):
    assert session.cancel() is None  # nothing runs
    events, cancelled = [], None
    began = None
    for event in session.stream(FOREVER):
        events.append(event)
        if isinstance(event, OutputEvent) and cancelled is None:
            began = time.monotonic()
            cancelled = session.cancel()
    assert time.monotonic() - began < 10
    assert cancelled.error.name == "Cancelled" and "looping" in cancelled.stdout
    end = events[-1]
    assert isinstance(end, EndEvent) and end.status == "cancelled" and end.result.error.name == "Cancelled"
    assert session.run("print('free again')").stdout == "free again\n"


def test_cancel_stops_a_run_waiting_in_another_thread(session):
    box: dict = {}
    runner = threading.Thread(target=lambda: box.update(result=session.run(FOREVER)))
    runner.start()
    deadline = time.monotonic() + 20
    while session.info()["running_execution"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # it prints, then loops
    assert session.cancel().error.name == "Cancelled"
    runner.join(15)
    assert box["result"].error.name == "Cancelled" and box["result"].exit_code == 130


def test_one_execution_at_a_time_or_queue(session):
    started = threading.Event()
    gate = "import os, time\nwhile not os.path.exists('go'):\n    time.sleep(0.05)\nprint('first')"
    box: dict = {}

    def first() -> None:
        for event in session.stream(gate):
            if isinstance(event, StartEvent):
                started.set()
            box["first"] = event

    thread = threading.Thread(target=first)
    thread.start()
    assert started.wait(20)
    with pytest.raises(ServiceError) as busy:
        session.run("print('refused')")
    assert (busy.value.status, busy.value.code, busy.value.retryable) == (409, "execution_running", True)
    second = threading.Thread(target=lambda: box.update(second=session.run("print('second')", queue=True)))
    second.start()
    time.sleep(0.5)
    assert "second" not in box  # waiting in line
    session.upload("go", b"")
    thread.join(20)
    second.join(20)
    assert box["first"].result.stdout == "first\n" and box["second"].stdout == "second\n"


def test_files_round_trip_with_bytes_that_are_not_utf8(session):
    blob = bytes(range(256))
    assert session.upload("data/raw blob.bin", blob)["size"] == 256
    session.upload("data/note.txt", "héllo")
    assert session.download("data/raw blob.bin") == blob
    listing = {f["name"]: f for f in session.files()}
    assert listing["data"]["type"] == "dir" and listing["data/raw blob.bin"]["size"] == 256
    assert sorted(f["name"] for f in session.files("data")) == ["data/note.txt", "data/raw blob.bin"]
    seen = session.run("print(len(open('data/raw blob.bin', 'rb').read()), open('data/note.txt').read())")
    assert seen.stdout == "256 héllo\n"
    session.run("open('made.bin', 'wb').write(bytes([255, 0, 128]))")
    assert session.download("made.bin") == b"\xff\x00\x80"
    session.delete("data/raw blob.bin")
    with pytest.raises(ServiceError) as gone:
        session.download("data/raw blob.bin")
    assert (gone.value.status, gone.value.code) == (404, "not_found")
    for escape in ("../outside.txt", "..", "/etc/passwd"):
        with pytest.raises(ServiceError) as refused:
            session.download(escape)
        assert refused.value.code == "path_escape", escape


def test_a_session_starts_with_env_files_and_limits(api):
    with api.session(
        env={"GREETING": "hi"},
        files={"seed.bin": b"\xff\x01"},
        limits={"timeout_s": 5},
        ttl_s=120,
        idle_ttl_s=60,
    ) as session:
        assert session.info()["limits"]["timeout_s"] == 5 and session.backend == "local"
        assert session.expires_at > session.idle_expires_at
        result = session.run("import os; print(os.environ['GREETING'], open('seed.bin', 'rb').read())")
        assert result.stdout == "hi b'\\xff\\x01'\n"


def test_reset_stops_what_runs_and_keeps_the_files(session):
    session.upload("kept.txt", "still here")
    events: list = []
    started = threading.Event()

    def follow() -> None:
        for event in session.stream(FOREVER):
            events.append(event)
            if isinstance(event, OutputEvent):
                started.set()

    thread = threading.Thread(target=follow)
    thread.start()
    assert started.wait(20)
    info = session.reset()
    thread.join(15)
    assert info["running_execution"] is None and events[-1].status == "cancelled"
    assert session.download("kept.txt") == b"still here"


def test_keepalive_moves_the_idle_expiry(session):
    before = session.idle_expires_at
    time.sleep(0.05)
    session.keepalive()
    assert session.idle_expires_at > before


def test_410_with_its_reason_after_close_and_after_an_idle_ttl(api):
    session = api.session()
    session.close()
    for call in (
        session.info,
        lambda: session.run("print(1)"),
        lambda: list(session.stream("print(1)")),
        lambda: session.upload("a.txt", "x"),
    ):
        with pytest.raises(SessionGoneError) as gone:
            call()
        assert (gone.value.status, gone.value.reason) == (410, "deleted") and session.id in str(gone.value)
    session.close()  # closing one that ended does nothing
    idle = api.session(idle_ttl_s=0.5)
    short = api.session(ttl_s=0.5)
    time.sleep(1.2)
    for ended, reason in ((idle, "idle"), (short, "ttl")):
        with pytest.raises(SessionGoneError) as gone:
            ended.run("print(1)")
        assert gone.value.reason == reason and "ttl_s" in gone.value.message


def test_an_execution_no_longer_kept_is_execution_gone_and_the_session_goes_on():
    """A 410 ``execution_gone`` (the server dropped an old execution past
    ``--session-kept-mb``) is ``ExecutionGoneError`` with the server's
    reason and the option to raise, not ``SessionGoneError``: the session is
    still open and runs on."""
    with running_server("--backend", "local", "--session-kept-mb", "1") as server:
        with (
            Client(server.url, server.token) as api,
            api.session(limits={"max_output_bytes": 1 << 20}) as session,
        ):
            printing = "import sys\nsys.stdout.write('a' * 700_000)\n"
            events = list(session.stream(printing))
            first = events[0].execution_id if isinstance(events[0], StartEvent) else None
            assert first is not None
            session.run(printing)  # the two hold 1.4 MiB: the first is dropped
            with pytest.raises(ExecutionGoneError) as gone:
                list(session.events(first))
            error = gone.value
            assert not isinstance(error, SessionGoneError) and isinstance(error, ServiceError)
            assert (error.status, error.code, error.reason) == (410, "execution_gone", "session_kept_bytes")
            assert first in error.message and "--session-kept-mb" in error.message, error.message
            assert session.run("print('still open')").output == "still open\n"


def test_a_jupyter_session_keeps_state_resets_it_and_streams_displays():
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    with (
        running_server("--backend", "jupyter") as server,
        Client(server.url, server.token, timeout_s=120) as client,
        client.session() as session,
    ):
        session.run("x = 41")
        assert session.run("print(x + 1)").stdout == "42\n"
        session.reset()
        assert session.run("print(x)").error.name == "NameError"
        events = list(session.stream("print('shown', flush=True)\n21 * 2"))
        displays = [e for e in events if isinstance(e, DisplayEvent)]
        assert displays and displays[-1].display.data == "42" and displays[-1].block == 0
        assert events[-1].result.displays[-1].data == "42"
