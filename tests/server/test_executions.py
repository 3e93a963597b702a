"""Executions in a session beyond JSON and SSE: the same events as NDJSON
lines, the core's block events, and ``?queue=1`` (wait in line instead of
409), against a real server."""

from __future__ import annotations

import json
import threading
import time

from httpx_sse import connect_sse

from tests.server._http import error_of, open_session

TWO_BLOCKS = {
    "blocks": [
        {"language": "python", "code": "print('one')"},
        {"language": "sh", "code": "echo two >&2; exit 4"},
    ]
}


def test_ndjson_lines_carry_the_same_events_as_sse(client):
    sid = open_session(client)["id"]
    with client.stream(
        "POST", f"/v1/sessions/{sid}/executions", json=TWO_BLOCKS, headers={"Accept": "application/x-ndjson"}
    ) as response:
        assert response.headers["content-type"].startswith("application/x-ndjson")
        lines = [json.loads(line) for line in response.iter_lines() if line]
    with connect_sse(client, "POST", f"/v1/sessions/{sid}/executions", json=TWO_BLOCKS) as source:
        events = list(source.iter_sse())
    assert [line["id"] for line in lines] == list(range(1, len(lines) + 1))

    def kinds(names: list[str]) -> list[str]:  # one write may come as two events: runs of a kind as one
        return [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]

    assert kinds([line["event"] for line in lines]) == kinds([e.event for e in events])
    names = [line["event"] for line in lines]
    assert names[:2] == ["start", "block_start"] and names[-1] == "end"
    assert [line["data"]["index"] for line in lines if line["event"] == "block_start"] == [0, 1]
    ends = [line["data"] for line in lines if line["event"] == "block_end"]
    assert [(e["index"], e["exit_code"], e["language"]) for e in ends] == [(0, 0, "python"), (1, 4, "sh")]
    stderr = [line["data"] for line in lines if line["event"] == "stderr"]
    assert "".join(d["text"] for d in stderr) == "two\n" and {d["block"] for d in stderr} == {1}
    assert lines[-1]["data"]["result"]["exit_code"] == 4
    eid = lines[0]["data"]["execution_id"]
    with client.stream(
        "GET",
        f"/v1/sessions/{sid}/executions/{eid}/events",
        params={"after": 2},
        headers={"Accept": "application/x-ndjson"},
    ) as response:
        replay = [json.loads(line) for line in response.iter_lines() if line]
    assert replay[0]["id"] == 3 and replay == lines[2:]
    client.delete(f"/v1/sessions/{sid}")


def test_queue_waits_in_line_instead_of_409(client):
    sid = open_session(client)["id"]
    url = f"/v1/sessions/{sid}/executions"
    first_out: dict = {}
    gate = "import os, time\nfor _ in range(600):\n    if os.path.exists('go'):\n        break\n    time.sleep(0.05)\n"
    first = threading.Thread(
        target=lambda: first_out.update(client.post(url, json={"code": gate + "print('first')"}).json())
    )
    first.start()
    for _ in range(200):
        if client.get(f"/v1/sessions/{sid}").json()["running_execution"]:
            break
        time.sleep(0.05)
    error_of(client.post(url, json={"code": "print('refused')"}), 409, "execution_running")
    second_out: dict = {}
    second = threading.Thread(
        target=lambda: second_out.update(
            client.post(url, params={"queue": 1}, json={"code": "print('second')"}).json()
        )
    )
    second.start()
    for _ in range(200):
        if client.get("/v1/info").json()["load"]["queued"] == 1:
            break
        time.sleep(0.05)
    assert client.get("/v1/info").json()["load"]["queued"] == 1
    assert not second_out  # still waiting in line
    assert client.put(f"/v1/sessions/{sid}/files/go", content=b"").status_code in (
        200,
        201,
    )  # lets the first end
    first.join(30)
    second.join(30)
    assert first_out["result"]["stdout"] == "first\n" and second_out["result"]["stdout"] == "second\n"
    assert client.get("/v1/info").json()["load"]["queued"] == 0
    client.delete(f"/v1/sessions/{sid}")


def test_an_event_a_byte_is_charged_for_what_it_costs_the_server(client):
    """A block that prints one byte at a time makes an event a byte: what
    the events keep is charged per event too (``EVENT_COST``), so that
    200,000 of them under a 64 KiB cap are not 200,000 kept events."""
    from execbox.server._executions import EVENT_COST

    cap = 64 << 10
    sid = open_session(client, limits={"max_output_bytes": cap})["id"]
    code = "import os\nfor _ in range(200_000):\n    os.write(1, b'x')\n"
    with client.stream(
        "POST",
        f"/v1/sessions/{sid}/executions",
        json={"code": code},
        headers={"Accept": "application/x-ndjson"},
    ) as response:
        lines = [json.loads(line) for line in response.iter_lines() if line]
    names = [line["event"] for line in lines]
    assert names[-1] == "end" and names.count("truncated") == 1, names[-3:]
    assert names.count("stdout") <= cap // EVENT_COST, names.count("stdout")
    assert lines[-1]["data"]["result"]["stdout"].startswith("x" * 1000)
    client.delete(f"/v1/sessions/{sid}")


def test_a_run_cancelled_before_the_core_ended_it_says_what_its_events_kept(tmp_path):
    """The server keeps no second capture of a running block's output
    (security issue 39: it held the flood 2.5 times its cap again): a
    result it makes itself, for a run the core never ended, is the text its
    events kept, with a line where the rest was not kept."""
    from execbox import Limits, Workspace
    from execbox._models import CodeBlock
    from execbox.backends import create_executor
    from execbox.server._executions import Execution

    with create_executor("local", workspace=Workspace(tmp_path), limits=Limits(max_output_bytes=4096)) as ex:
        execution = Execution("s_test", ex, [CodeBlock("python", "print(1)")])
        execution._emit("stdout", {"text": "out one\n", "block": 0})
        execution._emit("stderr", {"text": "err one\n", "block": 0})
        execution._emit("truncated", {"limit": 4096, "message": "the rest is not streamed"})
        result = execution._cancelled_result()
    assert result.stdout == "out one\n" and result.stderr == "err one\n"
    assert result.output.startswith("out one\nerr one\n\n[... the rest of the output was not kept")
    assert "limits.max_output_bytes=4096" in result.output and result.output.endswith("\nCancelled.\n")
    assert result.exit_code == 130 and result.error is not None and result.error.name == "Cancelled"
