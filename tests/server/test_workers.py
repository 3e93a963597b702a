"""``execbox serve --workers 2``: real worker processes on one loopback
socket. Each test holds connections it knows the worker of (an answer's
``X-Execbox-Worker``; a kept-alive connection stays with the worker that
accepted it), so that what crosses workers is asked for, not left to
chance: a session reached through the worker that does not hold it, one
concurrency limit, line and session count for the whole server, a killed
worker replaced and its slots given back, every worker stopped by SIGTERM."""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server._http import KEY_HEADER, Server, running_server

WORKER = "x-execbox-worker"
SPAN = "import time; t0 = time.time(); time.sleep({s}); print(t0, time.time())"


def pinned(server: Server, stack: ExitStack, per_worker: int) -> dict[int, list[httpx.Client]]:
    """``per_worker`` clients of one kept connection each, for each worker."""
    found: dict[int, list[httpx.Client]] = {0: [], 1: []}
    for _ in range(200):
        if all(len(clients) >= per_worker for clients in found.values()):
            return found
        client = stack.enter_context(
            server.client(session_keys=False, limits=httpx.Limits(max_connections=1), timeout=60.0)
        )
        worker = int(client.get("/v1/info").headers[WORKER])
        if len(found[worker]) < per_worker:
            found[worker].append(client)
        else:
            client.close()
    raise AssertionError(f"in 200 connections, fewer than {per_worker} reached each worker: {found}")


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found |= {int(child) for child in text}
    return found


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server(
        "--backend", "local", "--workers", "2", "--max-concurrency", "1", "--max-sessions", "4"
    ) as running:
        yield running


def test_a_session_is_reached_through_either_worker(server: Server) -> None:
    with ExitStack() as stack:
        clients = pinned(server, stack, 1)
        for maker in (0, 1):
            made = clients[maker][0].post("/v1/sessions", json={})
            assert made.status_code == 201, made.text
            sid, key = made.json()["id"], made.json()["key"]
            assert made.headers[WORKER] == str(maker) and sid.startswith(f"s_0{maker}")
            other = clients[1 - maker][0]
            headers = {KEY_HEADER: key}
            put = other.put(f"/v1/sessions/{sid}/files/note.txt", content=b"kept", headers=headers)
            assert put.status_code in (200, 201), put.text
            ran = other.post(
                f"/v1/sessions/{sid}/executions",
                json={"code": "print(open('note.txt').read())"},
                headers=headers,
            )
            assert ran.status_code == 200 and ran.json()["result"]["stdout"] == "kept\n", ran.text
            assert ran.headers[WORKER] == str(maker)  # answered by the worker that holds it
            eid = ran.json()["id"]
            shown = clients[maker][0].get(f"/v1/sessions/{sid}/executions/{eid}", headers=headers)
            assert shown.json()["status"] == "completed"
            with other.stream(
                "GET",
                f"/v1/sessions/{sid}/executions/{eid}/events",
                headers={**headers, "Accept": "text/event-stream"},
            ) as events:
                body = events.read().decode()
            assert events.status_code == 200 and "kept" in body and "event: end" in body, body[-300:]
            assert other.get(f"/v1/sessions/{sid}", headers={KEY_HEADER: "sk_wrong"}).status_code == 403
            assert other.delete(f"/v1/sessions/{sid}", headers=headers).status_code == 200
            gone = clients[maker][0].get(f"/v1/sessions/{sid}", headers=headers)
            assert gone.status_code == 410 and gone.json()["error"]["reason"] == "deleted"
            assert other.get(f"/v1/sessions/{sid}", headers=headers).status_code == 410


def test_one_concurrency_limit_and_line_for_every_worker(server: Server) -> None:
    with ExitStack() as stack:
        clients = pinned(server, stack, 3)
        answers: list[httpx.Response] = []

        def run(client: httpx.Client) -> None:
            answers.append(client.post("/v1/run", json={"code": SPAN.format(s=0.6)}))

        threads = [threading.Thread(target=run, args=(c,)) for group in clients.values() for c in group]
        for thread in threads:
            thread.start()
        seen = []
        deadline = time.monotonic() + 3
        with server.client() as watcher:
            while time.monotonic() < deadline and (not seen or seen[-1]["queued"] != 5):
                seen.append(watcher.get("/v1/info").json()["load"])
                time.sleep(0.05)
        # one runs, the five others wait in the lines of both workers
        assert (seen[-1]["running"], seen[-1]["queued"], seen[-1]["workers"]) == (1, 5, 2), seen
        for thread in threads:
            thread.join(60)
    assert [a.status_code for a in answers] == [200] * 6, [a.text for a in answers]
    assert {a.headers[WORKER] for a in answers} == {"0", "1"}
    spans = sorted(tuple(map(float, a.json()["stdout"].split())) for a in answers)
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert start >= end, f"two runs overlapped under --max-concurrency 1: {spans}"


@contextmanager
def tight_server() -> Iterator[Server]:
    with running_server(
        "--backend",
        "local",
        "--workers",
        "2",
        "--max-concurrency",
        "1",
        "--max-queue",
        "0",
        "--max-sessions",
        "1",
    ) as running:
        yield running


def test_past_the_limit_a_worker_refuses_what_another_holds_and_a_dead_worker_gives_back() -> None:
    with tight_server() as server, ExitStack() as stack:
        clients = pinned(server, stack, 1)
        made = clients[0][0].post("/v1/sessions", json={})
        assert made.status_code == 201
        refused = clients[1][0].post("/v1/sessions", json={})
        assert refused.status_code == 429, refused.text  # --max-sessions 1, held by worker 0
        assert clients[1][0].get("/v1/info").json()["load"]["sessions"] == 1

        holder: list[httpx.Response] = []
        long_run = threading.Thread(
            target=lambda: holder.append(_quietly(clients[0][0], SPAN.format(s=60))), daemon=True
        )
        long_run.start()
        deadline = time.monotonic() + 20
        while clients[1][0].get("/v1/info").json()["load"]["running"] != 1:
            assert time.monotonic() < deadline, "the long run never started"
            time.sleep(0.05)
        busy = clients[1][0].post("/v1/run", json={"code": "print(1)"})
        assert busy.status_code == 429 and "Retry-After" in busy.headers, busy.text

        worker0 = workers_of(server)[0]
        os.kill(worker0, signal.SIGKILL)  # it held the only slot and the only session
        deadline = time.monotonic() + 30
        while True:
            ran = clients[1][0].post("/v1/run", json={"code": "print(2)"})
            if ran.status_code == 200:
                break
            assert ran.status_code == 429 and time.monotonic() < deadline, ran.text
            time.sleep(0.2)
        assert ran.json()["stdout"] == "2\n"
        replaced = clients[1][0].post("/v1/sessions", json={})  # the dead worker's session is counted out
        assert replaced.status_code == 201, replaced.text
        lost = clients[1][0].get(
            f"/v1/sessions/{made.json()['id']}", headers={KEY_HEADER: made.json()["key"]}
        )
        assert lost.status_code in (404, 503), lost.text
        deadline = time.monotonic() + 30
        while workers_of(server).get(0) in (None, worker0):
            assert time.monotonic() < deadline, "no worker took the dead one's place"
            time.sleep(0.2)
        assert len(workers_of(server)) == 2


def _quietly(client: httpx.Client, code: str) -> httpx.Response | None:
    try:
        return client.post("/v1/run", json={"code": code})
    except httpx.TransportError:
        return None  # its worker was killed


def workers_of(server: Server) -> dict[int, int]:
    """The server's worker processes (index: pid), told from its other
    children (multiprocessing's resource tracker) by their sockets."""
    found = {}
    for pid in children(server.proc.pid):
        index = _worker_index(pid)
        if index is not None:
            found[index] = pid
    return found


def _worker_index(pid: int) -> int | None:
    """Which worker ``pid`` is: the one that listens on worker-<index>.sock."""
    for path in unix_sockets(pid):
        if "/worker-" in path:
            return int(path.rsplit("worker-", 1)[1].split(".")[0])
    return None


def unix_sockets(pid: int) -> set[str]:
    """The paths of the Unix sockets ``pid`` holds."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    paths = set()
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 8 and parts[6] in inodes:
            paths.add(parts[7])
    return paths


def test_sigterm_stops_every_worker_and_removes_their_sockets() -> None:
    with tight_server() as server:
        deadline = time.monotonic() + 30
        while len(workers_of(server)) < 2:  # the second may still be starting
            assert time.monotonic() < deadline, "the two workers never both listened"
            time.sleep(0.1)
        workers = set(workers_of(server).values())
        sockets = {path for pid in workers for path in unix_sockets(pid) if "execbox-serve-" in path}
        assert len(workers) == 2 and len(sockets) == 2, (workers, sockets)
        assert server.stop() == 0
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    assert not any(Path(path).parent.exists() for path in sockets)
