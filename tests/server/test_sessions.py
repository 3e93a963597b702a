"""Sessions against a real server: their lifecycle and 410s, executions as
JSON and as server-sent events (order, ids, resume, keepalive), cancel,
409, and the files routes."""

from __future__ import annotations

import threading
import time

from httpx_sse import connect_sse

from tests.server._http import error_of, open_session

LOOP = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n"


def test_session_lifecycle_and_410_with_the_reason(client):
    session = open_session(client, ttl_s=60, idle_ttl_s=30)
    sid = session["id"]
    assert session["expires_at"] and session["idle_expires_at"] and session["state"] == "open"
    assert client.get(f"/v1/sessions/{sid}").json()["expires_at"] == session["expires_at"]
    time.sleep(0.05)
    kept = client.post(f"/v1/sessions/{sid}/keepalive").json()
    assert (
        kept["idle_expires_at"] > session["idle_expires_at"] and kept["expires_at"] == session["expires_at"]
    )
    reset = client.post(f"/v1/sessions/{sid}/reset")
    assert reset.status_code == 200 and reset.json()["expires_at"]
    deleted = client.delete(f"/v1/sessions/{sid}")
    assert deleted.status_code == 200 and deleted.json()["state"] == "deleted"
    for call in (client.get, client.delete):
        assert error_of(call(f"/v1/sessions/{sid}"), 410, "session_expired")["reason"] == "deleted"
    gone = client.post(f"/v1/sessions/{sid}/executions", json={"code": "1"})
    assert error_of(gone, 410, "session_expired")["reason"] == "deleted"
    error_of(client.get("/v1/sessions/s_never"), 404, "not_found")


def test_bad_session_requests(client):
    error_of(client.post("/v1/sessions", json={"ttl_s": -1}), 400, "bad_request")
    error_of(client.post("/v1/sessions", json={"ttl_s": 10**9}), 400, "bad_request")
    error_of(client.post("/v1/sessions", json={"env": {"A": 1}}), 400, "bad_request")
    error_of(client.post("/v1/sessions", json={"limits": {"timeout_s": "x"}}), 400, "invalid_limits")
    error_of(client.post("/v1/sessions", json={"backend": "nope"}), 400, "bad_request")


def test_a_session_keeps_its_workspace_env_and_files(client):
    sid = open_session(client, env={"GREETING": "hi"}, files={"seed.txt": {"content": "seed"}})["id"]
    first = client.post(
        f"/v1/sessions/{sid}/executions",
        json={"code": "import os\nopen('kept.txt', 'w').write(os.environ['GREETING'])"},
    )
    assert first.status_code == 200 and first.json()["status"] == "completed"
    second = client.post(
        f"/v1/sessions/{sid}/executions", json={"language": "sh", "code": "cat kept.txt seed.txt"}
    ).json()
    assert second["result"]["stdout"] == "hiseed" and second["id"] != first.json()["id"]
    client.delete(f"/v1/sessions/{sid}")


def test_sse_events_in_order_with_ids(client):
    sid = open_session(client)["id"]
    code = LOOP + "import sys\nprint('oops', file=sys.stderr)\n"
    with connect_sse(client, "POST", f"/v1/sessions/{sid}/executions", json={"code": code}) as source:
        events = list(source.iter_sse())
    names = [e.event for e in events]
    assert names[0] == "start" and names[-1] == "end" and names[-2] == "block_end"
    assert [int(e.id) for e in events] == list(range(1, len(events) + 1))
    assert "".join(e.json()["text"] for e in events if e.event == "stdout") == "0\n1\n2\n"
    assert "".join(e.json()["text"] for e in events if e.event == "stderr") == "oops\n"
    end = events[-1].json()
    assert end["status"] == "completed" and end["result"]["stdout"] == "0\n1\n2\n"
    assert events[0].json()["execution_id"] == end["id"]
    client.delete(f"/v1/sessions/{sid}")


def test_a_dropped_stream_resumes_after_n(client):
    sid = open_session(client)["id"]
    with connect_sse(client, "POST", f"/v1/sessions/{sid}/executions", json={"code": LOOP}) as source:
        seen = []
        for event in source.iter_sse():
            seen.append(event)
            if event.event == "stdout":
                break  # the connection drops here
    eid = seen[0].json()["execution_id"]
    last = int(seen[-1].id)
    with connect_sse(
        client, "GET", f"/v1/sessions/{sid}/executions/{eid}/events", params={"after": last}
    ) as source:
        rest = list(source.iter_sse())
    assert int(rest[0].id) == last + 1 and rest[-1].event == "end"
    text = "".join(e.json()["text"] for e in seen + rest if e.event == "stdout")
    assert text == "0\n1\n2\n"
    with connect_sse(
        client, "GET", f"/v1/sessions/{sid}/executions/{eid}/events", headers={"Last-Event-ID": "1"}
    ) as source:
        again = list(source.iter_sse())
    assert int(again[0].id) == 2 and again[-1].event == "end"
    error_of(client.get(f"/v1/sessions/{sid}/executions/e_none/events"), 404, "not_found")
    client.delete(f"/v1/sessions/{sid}")


def test_keepalive_comments_while_the_code_is_quiet(server, client):
    sid = open_session(client)["id"]
    with client.stream(
        "POST",
        f"/v1/sessions/{sid}/executions",
        headers={"Accept": "text/event-stream"},
        json={"code": "import time; time.sleep(1.5)"},
    ) as response:
        body = "".join(response.iter_text())
    assert ": keepalive" in body and "event: end" in body
    client.delete(f"/v1/sessions/{sid}")


def test_one_execution_at_a_time_and_cancel_kills_a_loop(client):
    sid = open_session(client)["id"]
    started = threading.Event()
    box: dict = {}

    def run() -> None:
        with connect_sse(
            client,
            "POST",
            f"/v1/sessions/{sid}/executions",
            json={
                "code": "open('made.txt', 'w').write('x')\nprint('looping', flush=True)\nwhile True:\n    pass"
            },
        ) as source:
            for event in source.iter_sse():
                if event.event == "start":
                    box["eid"] = event.json()["execution_id"]
                if event.event == "stdout":
                    started.set()
                box["last"] = event

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(20)
    busy = client.post(f"/v1/sessions/{sid}/executions", json={"code": "1"})
    assert error_of(busy, 409, "execution_running")["retryable"] is True
    began = time.monotonic()
    cancelled = client.post(f"/v1/sessions/{sid}/executions/{box['eid']}/cancel").json()
    assert cancelled["status"] == "cancelled" and time.monotonic() - began < 10
    assert cancelled["result"]["error"]["name"] == "Cancelled" and "looping" in cancelled["result"]["stdout"]
    # the core's own result: the block that ran, and the file it made before it was cancelled
    assert [b["status"] for b in cancelled["result"]["blocks"]] == ["cancelled"]
    assert "made.txt" in cancelled["result"]["files"]
    thread.join(10)
    assert box["last"].event == "end" and box["last"].json()["status"] == "cancelled"
    after = client.post(f"/v1/sessions/{sid}/executions", json={"code": "print('free again')"}).json()
    assert after["result"]["stdout"] == "free again\n"
    state = client.get(f"/v1/sessions/{sid}/executions/{box['eid']}").json()
    assert state["status"] == "cancelled"
    client.delete(f"/v1/sessions/{sid}")


def test_files_list_read_write_remove(client):
    sid = open_session(client)["id"]
    base = f"/v1/sessions/{sid}/files"
    created = client.put(f"{base}/data/in.csv", content=b"a,b\n1,2\n")
    assert created.status_code == 201 and created.json()["size"] == 8
    assert client.put(f"{base}/data/in.csv", content=b"a,b\n").status_code == 200
    client.put(f"{base}/blob.bin", content=bytes(range(256)))
    listing = client.get(base).json()["files"]
    by_name = {f["name"]: f for f in listing}
    assert by_name["data"]["type"] == "dir" and by_name["data/in.csv"]["mime"] == "text/csv"
    assert by_name["blob.bin"]["size"] == 256 and by_name["blob.bin"]["mtime"] > 0
    assert [f["name"] for f in client.get(base, params={"path": "data"}).json()["files"]] == ["data/in.csv"]
    got = client.get(f"{base}/blob.bin")
    assert got.content == bytes(range(256)) and got.headers["content-type"] == "application/octet-stream"
    assert client.get(f"{base}/data/in.csv").text == "a,b\n"
    assert client.delete(f"{base}/data/in.csv").json()["deleted"] is True
    error_of(client.get(f"{base}/data/in.csv"), 404, "not_found")
    error_of(client.delete(f"{base}/nothing.txt"), 404, "not_found")
    error_of(client.get(f"{base}/data"), 400, "workspace_error")
    client.delete(f"/v1/sessions/{sid}")


def test_file_paths_that_escape_are_400_and_big_uploads_413(client):
    sid = open_session(client)["id"]
    base = f"/v1/sessions/{sid}/files"
    for bad in ("%2e%2e/escape.txt", "%2Fetc%2Fpasswd", ".execbox/code/x.py"):
        error_of(client.put(f"{base}/{bad}", content=b"x"), 400, "path_escape")
        error_of(client.get(f"{base}/{bad}"), 400, "path_escape")
    error_of(client.get(base, params={"path": "../.."}), 400, "path_escape")
    error_of(client.put(f"{base}/big.bin", content=b"x" * ((1 << 20) + 1)), 413, "too_large")
    client.post(
        f"/v1/sessions/{sid}/executions", json={"code": "open('made.bin', 'wb').write(b'x' * (2 << 20))"}
    )
    error_of(client.get(f"{base}/made.bin"), 413, "too_large")
    client.delete(f"/v1/sessions/{sid}")


def test_a_sandbox_session_keeps_its_workspace(client, require_component):
    from execbox.backends.sandbox import find_bwrap

    require_component("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    sid = open_session(client, backend="sandbox", files={"in.txt": "seed"})["id"]
    client.post(
        f"/v1/sessions/{sid}/executions", json={"code": "open('out.txt', 'w').write(open('in.txt').read())"}
    )
    second = client.post(
        f"/v1/sessions/{sid}/executions", json={"language": "sh", "code": "cat out.txt"}
    ).json()
    assert second["result"]["stdout"] == "seed" and second["result"]["backend"] == "sandbox"
    assert client.get(f"/v1/sessions/{sid}/files/out.txt").text == "seed"
    client.delete(f"/v1/sessions/{sid}")


def test_files_uploaded_into_a_running_sandbox_session_are_the_blocks_to_rewrite(client, require_component):
    # As root, the host writes uploads as root; the jail's identity must be
    # able to rewrite them in place and to write in the folders they made.
    from execbox.backends.sandbox import find_bwrap

    require_component("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    sid = open_session(client, backend="sandbox")["id"]
    client.post(f"/v1/sessions/{sid}/executions", json={"code": "print('started')"})
    assert client.put(f"/v1/sessions/{sid}/files/up/deep/data.txt", content=b"one").status_code == 201
    code = (
        "with open('up/deep/data.txt', 'r+') as f:\n    f.seek(0, 2)\n    f.write(' two')\n"
        "open('up/deep/new.txt', 'w').write('made')\nprint('ok')"
    )
    done = client.post(f"/v1/sessions/{sid}/executions", json={"code": code}).json()
    assert done["result"]["stdout"] == "ok\n", done["result"]
    assert client.get(f"/v1/sessions/{sid}/files/up/deep/data.txt").text == "one two"
    assert client.get(f"/v1/sessions/{sid}/files/up/deep/new.txt").text == "made"
    client.delete(f"/v1/sessions/{sid}")
