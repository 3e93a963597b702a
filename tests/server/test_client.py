"""execbox.Client against a real ``execbox serve`` on loopback: runs with
files in and fetched back, batches as their lines come, and the errors a
caller meets (a refused request, 429, a wrong token, no server at all).
Sessions: test_client_sessions.py."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from execbox import (
    Client,
    CodeBlock,
    ConfigurationError,
    ExecboxError,
    Limits,
    ServiceBusyError,
    ServiceError,
    SessionGoneError,
)
from execbox._run_events import OutputEvent
from execbox.client import RunResult
from execbox.client._sse import Frame, frames, run_event
from tests.server._http import SRC, free_port, running_server

NOT_UTF8 = b"\xff\xfe\x00binary\x80"


@pytest.fixture
def api(server):
    with Client(server.url, server.token, timeout_s=30) as made:
        yield made


def test_info_names_the_server(api):
    info = api.info()
    assert info["default_backend"] == "local" and "python" in info["languages"]
    assert info["capabilities"]["resume"] is True


def test_run_with_files_in_and_fetched_back(api):
    result = api.run(
        "data = open('in.bin', 'rb').read()\n"
        "open('out.bin', 'wb').write(data[::-1])\n"
        "print(open('note.txt').read().upper())",
        files={"in.bin": NOT_UTF8, "note.txt": "héllo"},
        fetch_files=["out.bin", "note.txt", "nope.txt"],
    )
    assert isinstance(result, RunResult) and result.ok, result.output
    assert result.stdout == "HÉLLO\n"
    assert result.fetched == {"out.bin": NOT_UTF8[::-1], "note.txt": "héllo".encode()}
    assert set(result.fetch_errors) == {"nope.txt"} and "nope.txt" in result.fetch_errors["nope.txt"]
    assert result.to_dict()["file_contents"]["out.bin"]["encoding"] == "base64"
    assert RunResult.from_dict(result.to_dict()) == result  # the wire shape both ways


def test_judge_on_the_server_and_stdin_in_a_run(api):
    result = api.judge(
        "a, b = map(int, input().split())\nprint(a + b)",
        "python",
        [{"stdin": "1 2", "expected_stdout": "3", "name": "small"}, {"stdin": "2 2", "expected_stdout": "5"}],
        stop_on_failure=False,
        limits={"timeout_s": 10},
    )
    assert result.verdict == "wrong_answer" and (result.passed, result.total) == (1, 2)
    assert [c.verdict for c in result.cases] == ["accepted", "wrong_answer"] and result.cases[
        0
    ].name == "small"
    assert "expected '5', got '4'" in result.cases[1].message
    ran = api.run(blocks=[CodeBlock("python", "print(input()[::-1])", stdin="olleh")])
    assert ran.stdout == "hello\n", ran.output


def test_run_blocks_and_limits(api):
    result = api.run(blocks=[CodeBlock("python", "print('one')"), {"language": "sh", "code": "echo two"}])
    assert result.stdout == "one\ntwo\n" and [b.language for b in result.blocks] == ["python", "sh"]
    slow = "import time; time.sleep(30)"
    for limits in ({"timeout_s": 1}, Limits(timeout_s=1)):
        began = time.monotonic()
        timed = api.run(slow, limits=limits)
        assert timed.timed_out and timed.exit_code == 124 and time.monotonic() - began < 15


def test_failing_code_is_a_result_and_a_refused_request_an_error(api):
    failed = api.run("1/0")
    assert not failed.ok and failed.error.name == "ZeroDivisionError"
    with pytest.raises(ServiceError) as refused:
        api.run("print(1)", limits={"timeout_s": 10_000})
    error = refused.value
    assert (error.status, error.code, error.retryable) == (400, "invalid_limits", False)
    assert "--max-timeout" in str(error) and "HTTP 400" in str(error)
    with pytest.raises(ServiceError) as unknown:
        api.run("print(1)", backend="docker")
    assert unknown.value.code == "bad_request" and "--backends" in unknown.value.message


def test_arguments_are_checked_before_anything_is_sent(api):
    for call in (
        lambda: api.run(),
        lambda: api.run("1", blocks=[{"code": "2"}]),
        lambda: api.run(blocks=[{"language": "sh"}]),
        lambda: api.run("1", files={"a": 5}),
        lambda: api.run("1", fetch_files="out.txt"),
        lambda: api.run("1", limits=5),
        lambda: api.batch([{"code": "1", "timeout": 3}]),
        lambda: api.batch([]),
        lambda: api.batch("print(1)"),
    ):
        with pytest.raises(ConfigurationError):
            call()
    with pytest.raises(ConfigurationError, match="http://"):
        Client("127.0.0.1:8000")
    with pytest.raises(ConfigurationError, match="timeout_s"):
        Client(timeout_s=0)


def test_batch_yields_each_line_as_it_comes_with_its_index(api):
    requests = [
        "import time; time.sleep(2); print('slow')",
        {"code": "print('fast')"},
        {"code": "echo shell", "language": "sh", "files": {"x.bin": NOT_UTF8}, "fetch_files": ["x.bin"]},
        {"code": "1", "limits": {"timeout_s": -1}},
    ]
    began = time.monotonic()
    seen = []
    for index, item in api.batch(requests, max_concurrency=4):
        seen.append((index, item, time.monotonic() - began))
    assert sorted(index for index, _, _ in seen) == [0, 1, 2, 3]
    assert seen[-1][0] == 0 and seen[0][2] < 1.5  # the fast ones came before the slow one ended
    by_index = {index: item for index, item, _ in seen}
    assert by_index[0].stdout == "slow\n" and by_index[1].stdout == "fast\n"
    assert by_index[2].stdout == "shell\n" and by_index[2].fetched == {"x.bin": NOT_UTF8}
    refused = by_index[3]
    assert isinstance(refused, ServiceError) and (refused.status, refused.code) == (400, "invalid_limits")


def test_batch_in_order_with_one_at_a_time(api):
    results = list(api.batch([f"print({i})" for i in range(4)], max_concurrency=1))
    assert [index for index, _ in results] == [0, 1, 2, 3]
    assert [result.stdout for _, result in results] == ["0\n", "1\n", "2\n", "3\n"]


def test_a_run_longer_than_run_timeout_s_is_a_timeout_naming_it(server):
    with Client(server.url, server.token, run_timeout_s=0.5) as impatient:
        with pytest.raises(ServiceError) as late:
            impatient.run("import time; time.sleep(3)")
        assert (
            late.value.code == "timeout" and "run_timeout_s" in str(late.value) and not late.value.retryable
        )
        assert impatient.info()["version"]  # the other requests keep timeout_s


def test_no_server_is_a_clear_error():
    url = f"http://127.0.0.1:{free_port()}"
    with Client(url) as nowhere:
        for call in (nowhere.info, lambda: nowhere.run("print(1)"), nowhere.session):
            with pytest.raises(ServiceError) as failed:
                call()
            error = failed.value
            assert error.status is None and error.code == "unreachable" and error.retryable
            assert url in str(error) and "execbox serve" in str(error)


def test_a_wrong_or_missing_token_is_a_clear_error(monkeypatch):
    monkeypatch.delenv("EXECBOX_TOKEN", raising=False)
    with running_server("--backend", "local", token="s3cret") as server:
        for token, sent in (("wrong", "does not take"), (None, "sent none")):
            with Client(server.url, token) as client, pytest.raises(ServiceError) as refused:
                client.run("print(1)")
            error = refused.value
            assert (error.status, error.code) == (401, "unauthorized")
            assert (
                sent in error.message
                and "EXECBOX_TOKEN" in error.message
                and "Client(token=" in error.message
            )
        monkeypatch.setenv("EXECBOX_TOKEN", "s3cret")
        with Client(server.url) as from_env:
            assert from_env.run("print(6 * 7)").stdout == "42\n"
            assert "s3cret" not in repr(from_env)


def test_a_full_server_is_service_busy_with_retry_after():
    with (
        running_server(
            "--backend", "local", "--max-sessions", "1", "--max-concurrency", "1", "--max-queue", "0"
        ) as server,
        Client(server.url, server.token) as client,
    ):
        with client.session() as first:
            with pytest.raises(ServiceBusyError) as busy:
                client.session()
            error = busy.value
            assert error.status == 429 and error.retryable and error.retry_after >= 1
            assert "--max-sessions" in str(error) and isinstance(error, ServiceError)
            started = threading.Event()

            def hold() -> None:
                for event in first.stream("import time\nprint('up', flush=True)\ntime.sleep(3)"):
                    if isinstance(event, OutputEvent):
                        started.set()

            holder = threading.Thread(target=hold)
            holder.start()
            assert started.wait(20)
            with pytest.raises(ServiceBusyError) as full:
                client.run("print(1)")
            assert full.value.retry_after >= 1 and "--max-concurrency" in full.value.message
            holder.join(20)
        assert client.run("print(1)").stdout == "1\n"  # free again


def test_errors_join_the_tree():
    assert issubclass(SessionGoneError, ServiceError) and issubclass(ServiceBusyError, ServiceError)
    assert issubclass(ServiceError, ExecboxError)
    gone = SessionGoneError("session s_1 has ended: it was deleted", reason="deleted")
    assert (gone.status, gone.code, gone.reason) == (410, "session_expired", "deleted")
    assert str(gone) == "session s_1 has ended: it was deleted (HTTP 410 session_expired)"


def test_server_sent_events_read_by_hand():
    text = (
        'id: 1\r\nevent: stdout\r\ndata: {"text": "a", "block": 0}\r\n\r\n: keepalive\n\n'
        'id: 2\nevent: future_kind\ndata: {}\n\nid: 3\revent: stderr\rdata: {"text":\rdata: "b"}\r\r'
        'id: 4\nevent: stdout\ndata: {"text": "cut off'
    )
    whole = list(frames([text]))
    assert [f.id for f in whole] == ["1", "2", "3"]  # the last one never ended: not an event
    assert whole[2] == Frame("3", "stderr", '{"text":\n"b"}')
    for size in (1, 2, 3, 7):  # however the text is cut in chunks
        assert list(frames(text[i : i + size] for i in range(0, len(text), size))) == whole
    assert run_event(whole[0]) == OutputEvent("stdout", "a", 0)
    assert run_event(whole[1]) is None  # a kind this version does not know is skipped
    assert (
        run_event(Frame("5", "block_start", '{"kind": "block_start", "index": 1, "language": "sh"}')).index
        == 1
    )
    with pytest.raises(ServiceError, match="cannot read"):
        run_event(Frame("6", "block_end", '{"index": 0}'))


def test_without_httpx_execbox_imports_and_client_names_the_extra():
    script = (
        "import sys\nimport execbox\nassert 'httpx' not in sys.modules, 'imported with execbox'\n"
        "sys.modules['httpx'] = None  # as if it were not installed\n"
        "try:\n    execbox.Client()\nexcept execbox.ConfigurationError as exc:\n    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": SRC},
    )
    assert done.returncode == 0, done.stderr
    assert "-m pip install -e" in done.stdout and "[client]'" in done.stdout
