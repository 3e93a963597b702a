"""A client that goes away before its answer cancels its work: the block
killed, no further block started, the slot freed (security issue 39: a
judge kept its slot for all its cases; ``/v1/run``, ``/v1/batch`` and
``/run_code`` ran to their end after the client left). A real server of
one slot and no line, on loopback; the request sent on a raw socket
(``send_raw``, which test_gone_waiting.py shares), closed while its block
sleeps."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server._http import Server, running_server

SLEEP_S = 120  # far longer than the test waits for the block's end


def slow(pids: Path) -> str:
    return f"import os, time\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\ntime.sleep({SLEEP_S})\n"


def bodies(pids: Path) -> dict[str, dict[str, Any]]:
    run = {"code": slow(pids), "limits": {"timeout_s": 2 * SLEEP_S}}
    return {
        "/v1/run": run,
        "/v1/batch": {"requests": [run, run, run], "max_concurrency": 1},
        "/run_code": {"code": slow(pids), "language": "python", "run_timeout": 2 * SLEEP_S},
    }


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as status:
            return "zombie" not in status.read()
    except OSError:
        return False


def until(what: Callable[[], Any], deadline_s: float = 30.0) -> Any:
    end = time.monotonic() + deadline_s
    while not (found := what()):
        assert time.monotonic() < end, f"not within {deadline_s:g} s"
        time.sleep(0.1)
    return found


def send_raw(
    server: Server, route: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> socket.socket:
    """A request sent whole on a connection of its own, its answer never read:
    closing the socket is the client going away."""
    port = int(server.url.rsplit(":", 1)[1])
    data = json.dumps(body).encode()
    more = "".join(f"{name}: {value}\r\n" for name, value in (headers or {}).items())
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(
        f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{more}".encode()
        + f"Authorization: Bearer {server.token}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        + data
    )
    return sock


def load(client: httpx.Client) -> dict[str, Any]:
    answer = client.get("/v1/info")
    assert answer.status_code == 200, answer.text
    return answer.json()["load"]


def load_when(client: httpx.Client, **counts: int) -> dict[str, Any] | None:
    """``/v1/info``'s load when its ``counts`` (running=, queued=) are these, else None (for ``until``)."""
    now = load(client)
    return now if all(now[name] == count for name, count in counts.items()) else None


@pytest.mark.parametrize("route", ["/v1/run", "/v1/batch", "/run_code"])
def test_a_client_that_goes_away_cancels_its_run_and_frees_its_slot(route: str, tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    with running_server("--backend", "local", "--max-concurrency", "1", "--max-queue", "0") as server:
        with send_raw(server, route, bodies(pids)[route]):
            [first] = until(lambda: pids.exists() and pids.read_text().split())
            with server.client() as client:
                refused = client.post("/v1/run", json={"code": "print(1)"})
                assert refused.status_code == 429, refused.text  # the run holds the one slot
        # its client has gone: its block is killed within the deadline, far before its sleep ends
        until(lambda: not alive(int(first)))
        with server.client() as client:
            until(lambda: client.get("/v1/info").json()["load"]["running"] == 0)
            served = client.post("/v1/run", json={"code": "print('served')"})
            assert served.status_code == 200 and served.json()["output"] == "served\n", served.text
        assert pids.read_text().split() == [first], "a block started after the client left"
