"""The service as a whole, each test with a server of its own: 429 under a
burst, session expiry and its reaper, the token, and a shutdown that
leaves no process behind."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import process_alive, require, wait_dead
from tests.server._http import SRC, descendants, error_of, open_session, running_server

SLOW = {"code": "import time; time.sleep(2); print('slow')"}


def test_over_max_concurrency_with_no_line_is_429_at_once():
    with (
        running_server("--backend", "local", "--max-concurrency", "1", "--max-queue", "0") as server,
        server.client() as client,
    ):
        answers: list = []
        first = threading.Thread(target=lambda: answers.append(client.post("/v1/run", json=SLOW)))
        first.start()
        deadline = time.monotonic() + 10
        while client.get("/v1/info").json()["load"]["running"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        began = time.monotonic()
        second = client.post("/v1/run", json=SLOW)
        assert time.monotonic() - began < 1.0  # an answer at once, never a hang
        assert error_of(second, 429, "busy")["retryable"] is True
        assert int(second.headers["Retry-After"]) >= 1
        sid = open_session(client)["id"]
        error_of(client.post(f"/v1/sessions/{sid}/executions", json={"code": "1"}), 429, "busy")
        error_of(client.post("/v1/batch", json={"requests": [SLOW]}), 429, "busy")
        first.join(10)
        assert answers[0].status_code == 200 and answers[0].json()["stdout"] == "slow\n"
        assert client.post("/v1/run", json={"code": "print(1)"}).status_code == 200


def test_a_burst_of_8x_the_concurrency_waits_in_line_and_all_of_it_runs():
    with running_server("--backend", "local", "--max-concurrency", "2") as server, server.client() as client:
        load = client.get("/v1/info").json()["load"]
        assert (load["max_queued"], load["max_queue_wait_s"]) == (16, 30)  # the defaults: 8x, 30 s
        answers: dict[int, Any] = {}
        burst = [
            threading.Thread(
                target=lambda n=n: answers.__setitem__(n, client.post("/v1/run", json=_sleepy(n)))
            )
            for n in range(16)
        ]
        for thread in burst:
            thread.start()
        deadline = time.monotonic() + 10
        seen = client.get("/v1/info").json()["load"]
        while seen["queued"] == 0 and time.monotonic() < deadline:
            seen = client.get("/v1/info").json()["load"]
        assert seen["queued"] > 0 and seen["running"] == 2  # a line, never more than the slots running
        for thread in burst:
            thread.join(60)
        assert {n: (r.status_code, r.json().get("stdout")) for n, r in answers.items()} == {
            n: (200, f"{n}\n") for n in range(16)
        }
        assert (
            client.get("/v1/info").json()["load"] | {"running": 0, "queued": 0, "longest_wait_s": 0}
            == (client.get("/v1/info").json()["load"])
        )


def _sleepy(n: int) -> dict[str, str]:
    return {"code": f"import time; time.sleep(0.3); print({n})"}


def test_past_the_line_or_its_wait_is_429_with_a_retry_after_from_the_line():
    with (
        running_server(
            "--backend", "local", "--max-concurrency", "1", "--max-queue", "1", "--max-queue-wait", "1"
        ) as server,
        server.client() as client,
    ):
        answers: dict[str, Any] = {}
        first = threading.Thread(
            target=lambda: answers.__setitem__("first", client.post("/v1/run", json=SLOW))
        )
        first.start()
        deadline = time.monotonic() + 10
        while client.get("/v1/info").json()["load"]["running"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        waits = threading.Thread(
            target=lambda: answers.__setitem__("waits", client.post("/v1/run", json=SLOW))
        )
        waits.start()
        while client.get("/v1/info").json()["load"]["queued"] < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        began = time.monotonic()
        full = client.post("/v1/run", json=SLOW)  # the line holds one: refused at once
        assert time.monotonic() - began < 1.0
        assert "--max-queue 1" in error_of(full, 429, "busy")["message"]
        assert int(full.headers["Retry-After"]) >= 1
        waits.join(10)  # its second in line ran out before the 2 s block ended
        assert "1 s of waiting" in error_of(answers["waits"], 429, "busy")["message"]
        first.join(10)
        assert answers["first"].status_code == 200 and answers["first"].json()["stdout"] == "slow\n"


def test_a_batch_queues_its_requests_within_the_limit():
    with running_server("--backend", "local", "--max-concurrency", "1") as server, server.client() as client:
        requests = [{"code": f"print({i})"} for i in range(4)]
        with client.stream("POST", "/v1/batch", json={"requests": requests}) as response:
            lines = [line for line in response.iter_lines() if line]
        assert len(lines) == 4 and response.status_code == 200
        assert (
            client.get("/v1/info").json()["load"] | {"running": 0, "queued": 0}
            == client.get("/v1/info").json()["load"]
        )


def test_over_max_sessions_is_429():
    with running_server("--backend", "local", "--max-sessions", "1") as server, server.client() as client:
        sid = open_session(client)["id"]
        response = client.post("/v1/sessions", json={})
        assert error_of(response, 429, "busy")["retryable"] and response.headers["Retry-After"]
        client.delete(f"/v1/sessions/{sid}")
        open_session(client)


def test_ttl_and_idle_expiry_answer_410_and_close_the_executor():
    with running_server("--backend", "local") as server, server.client() as client:
        by_ttl = open_session(client, ttl_s=1.5)["id"]
        by_idle = open_session(client, ttl_s=60, idle_ttl_s=1.0)["id"]
        where = (
            client.post(f"/v1/sessions/{by_idle}/executions", json={"code": "import os; print(os.getcwd())"})
            .json()["result"]["stdout"]
            .strip()
        )
        assert Path(where).is_dir()
        kept = open_session(client, ttl_s=60, idle_ttl_s=1.0)["id"]
        for _ in range(4):  # kept alive past its idle ttl
            time.sleep(0.5)
            assert client.post(f"/v1/sessions/{kept}/keepalive").status_code == 200
        time.sleep(0.6)
        assert error_of(client.get(f"/v1/sessions/{by_ttl}"), 410, "session_expired")["reason"] == "ttl"
        assert error_of(client.get(f"/v1/sessions/{by_idle}"), 410, "session_expired")["reason"] == "idle"
        deadline = time.monotonic() + 5
        while Path(where).exists() and time.monotonic() < deadline:  # the reaper closed its executor
            time.sleep(0.05)
        assert not Path(where).exists()
        assert client.get("/v1/info").json()["load"]["sessions"] == 1


def test_the_token_is_required_when_set():
    with running_server("--backend", "local", token="s3cret") as server:
        with server.client() as client:
            assert client.get("/v1/info").status_code == 200
            sid = open_session(client)["id"]
        import httpx

        with httpx.Client(base_url=server.url, timeout=10) as anonymous:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cret"}):
                response = anonymous.get(f"/v1/sessions/{sid}", headers=headers)
                assert (
                    error_of(response, 401, "unauthorized")
                    and response.headers["WWW-Authenticate"] == "Bearer"
                )
            error_of(anonymous.post("/v1/run", json={"code": "print(1)"}), 401, "unauthorized")


def test_listening_off_loopback_needs_a_token():
    done = subprocess.run(
        [sys.executable, "-m", "execbox.cli", "serve", "--host", "0.0.0.0", "--port", "0", "--no-token"],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin"},
    )
    assert done.returncode == 2 and "without a token" in done.stderr and "--no-token" in done.stderr


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_shutdown_leaves_no_process_behind(sig):
    from execbox.backends.sandbox import find_bwrap

    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    with running_server("--backend", "sandbox", "--backends", "local") as server, server.client() as client:
        where = "import os; print(os.getcwd())"
        kept = client.post("/v1/run", json={"code": where}).json()  # an executor kept for the next run
        sid = open_session(client)["id"]
        local = open_session(client, backend="local")["id"]
        workspaces = [
            Path(kept["stdout"].strip()),
            *(
                Path(
                    client.post(f"/v1/sessions/{s}/executions", json={"code": where})
                    .json()["result"]["stdout"]
                    .strip()
                )
                for s in (sid, local)
            ),
        ]
        assert all(w.is_dir() for w in workspaces)
        started = threading.Event()

        def follow() -> None:  # a stream open when the signal comes
            try:
                with client.stream(
                    "POST",
                    f"/v1/sessions/{sid}/executions",
                    headers={"Accept": "text/event-stream"},
                    json={"code": "import time\nprint('up', flush=True)\ntime.sleep(300)"},
                ) as stream:
                    for line in stream.iter_lines():
                        if "up" in line:
                            started.set()
            except Exception:  # noqa: BLE001 - the server going away ends it
                pass

        thread = threading.Thread(target=follow, daemon=True)
        thread.start()
        assert started.wait(20)
        children = descendants(server.proc.pid)
        assert children  # the sandbox's jails and the sleeping block
        began = time.monotonic()
        # uvicorn raises the signal again once shut down: the usual status of a process it ended
        assert server.stop(sig, timeout=30) in (0, -sig, 128 + sig)
        assert time.monotonic() - began < 20
        assert wait_dead(children, timeout=10) == []
        assert not any(process_alive(pid) for pid in children)
        assert not any(w.exists() for w in workspaces)  # every executor was closed
        thread.join(5)
