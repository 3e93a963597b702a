"""Soak: 64 concurrent HTTP clients on loopback against a real ``execbox
serve`` (the sandbox backend, ``--max-concurrency 8``): bursts of ``POST
/v1/run`` with idle gaps around and past 5 s (uvicorn's default keep-alive,
httpx's idle expiry: where connections were reset) and around the reaper's
0.5 s tick; blocks that print their number, time out, crash, fill their
output. Every request is answered, none dropped: its result (each
``print(N)`` with N), or 429 in the error shape; the server logs no error;
afterwards it holds no connection, process or descriptor more than before.

Half the clients are plain httpx (its defaults: an idle connection kept
5 s), half execbox's ``Client``. Descriptors and processes are counted
beside the sandbox's warm units (``/v1/info``'s ``pools``), which come and
go as the pools refill. Default: ~50 s (7 idle gaps per client; against
the server before its keep-alive fix it lost 1, 5 and 3 requests in three
runs); EXECBOX_FAST=1: ~15 s (one gap per client: a smoke check).
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import process_alive, require
from tests.server._http import Server, descendants, running_server

FAST = os.environ.get("EXECBOX_FAST") == "1"
CLIENTS = 64
SLOTS = 8
NEAR_5 = (4.9, 5.02)  # the old race: just under the server's keep-alive and httpx's idle expiry, both 5 s
PAST_5 = (5.5, 6.5)
TICK = (0.3, 0.7)  # around the reaper's 0.5 s
GAPS = [NEAR_5] if FAST else [NEAR_5, NEAR_5, TICK, NEAR_5, PAST_5, NEAR_5, NEAR_5, TICK]
BURST = 2 if FAST else 3  # runs in a row, at most


def _request(n: int, kind: str, rnd: random.Random) -> dict[str, Any]:
    head = f"print({n}, flush=True)\n"
    if kind == "timeout":
        return {"code": head + "import time\ntime.sleep(30)", "limits": {"timeout_s": 0.5}}
    if kind == "crash":
        return {
            "code": head
            + rnd.choice(
                ["import os\nos._exit(7)", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"]
            )
        }
    if kind == "flood":
        return {
            "code": head + "import sys\nsys.stdout.write('x' * 4_000_000)",
            "limits": {"max_output_bytes": 65536},
        }
    return {"code": f"print({n})"}


def _wrong(n: int, kind: str, result: dict[str, Any]) -> str | None:
    """Why a 200's result is not the one its request asked for (None: it is)."""
    stdout = result.get("stdout", "")
    checks = {
        "print": stdout == f"{n}\n" and result["exit_code"] == 0,
        "timeout": stdout == f"{n}\n" and result["timed_out"] is True,
        "crash": stdout == f"{n}\n" and result["exit_code"] not in (0, None),
        "flood": stdout.startswith(f"{n}\nxxx") and result["truncated"] is True,
    }
    return None if checks[kind] else f"{kind} #{n}: {str(result)[:300]}"


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: Counter[str] = Counter()
        self.problems: list[str] = []

    def add(self, outcome: str, problem: str | None = None) -> None:
        with self.lock:
            self.counts[outcome] += 1
            if problem is not None:
                self.problems.append(problem)


def _busy_shape(status: int, body: Any, retry_after: Any) -> bool:
    error = body.get("error") if isinstance(body, dict) else None
    return (
        status == 429
        and isinstance(error, dict)
        and error.get("code") == "busy"
        and error.get("retryable") is True
        and bool(error.get("message"))
        and retry_after is not None
    )


def _ask_httpx(client: httpx.Client, n: int, kind: str, rnd: random.Random) -> tuple[str, str | None]:
    try:
        response = client.post("/v1/run", json=_request(n, kind, rnd))
    except httpx.TransportError as exc:
        return "dropped", f"#{n} {kind}: {type(exc).__name__}: {exc}"
    if response.status_code == 200:
        problem = _wrong(n, kind, response.json())
        return ("wrong" if problem else "ok"), problem
    if _busy_shape(response.status_code, response.json(), response.headers.get("retry-after")):
        return "busy", None
    return "wrong", f"#{n} {kind}: HTTP {response.status_code} {response.text[:300]}"


def _ask_execbox(client: Any, n: int, kind: str, rnd: random.Random) -> tuple[str, str | None]:
    from execbox import ServiceError

    asked = _request(n, kind, rnd)
    try:
        result = client.run(asked["code"], limits=asked.get("limits"))
    except ServiceError as exc:
        if exc.status is None:  # no answer: unreachable, timeout or connection_lost
            return "dropped", f"#{n} {kind}: {exc}"
        if exc.status == 429 and exc.code == "busy" and exc.retryable and exc.retry_after:
            return "busy", None
        return "wrong", f"#{n} {kind}: {exc}"
    problem = _wrong(n, kind, result.to_dict())
    return ("wrong" if problem else "ok"), problem


def _client(server: Server, plain: bool, numbers: Any, tally: Tally, rnd: random.Random) -> None:
    """Bursts of 1 to ``BURST`` runs, each followed by the next of ``GAPS``."""
    from execbox import Client

    ask = _ask_httpx if plain else _ask_execbox
    with server.client(timeout=60) if plain else Client(server.url, server.token, run_timeout_s=60) as client:
        for gap in [*GAPS, None]:
            for _ in range(rnd.randint(1, BURST)):
                n, kind = next(numbers), rnd.choices(["print", "timeout", "crash", "flood"], [7, 1, 1, 1])[0]
                tally.add(*ask(client, n, kind, rnd))
            if gap is not None:
                time.sleep(rnd.uniform(*gap))


def _held(server: Server) -> tuple[int, int, int, int]:
    """What the server holds beside its warm pools: descriptors (less the
    two of each unit a pool holds ready), live processes under it (less
    the pools' units), TCP connections on its port still open or waiting
    for it to close; and its kept executors. From ``/v1/info``: the pools
    (the sandbox's health) and the load."""
    auth = {"Authorization": f"Bearer {server.token}"} if server.token else {}
    answer = httpx.get(f"{server.url}/v1/info", headers={"Connection": "close", **auth})
    assert answer.status_code == 200, answer.text
    info = answer.json()
    pools = info["pools"]
    health = [pool["health"] for pool in pools]
    ready = sum(h.get("boxes_ready", 0) for h in health)
    units = sum(h.get("boxes", 0) + h.get("boxes_asked", 0) for h in health)
    pid, port = server.proc.pid, int(server.url.rsplit(":", 1)[1])
    fds = len(os.listdir(f"/proc/{pid}/fd"))
    connections = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()  # ESTABLISHED 01, CLOSE_WAIT 08 (the client closed, the server not yet)
            if fields[1].endswith(f":{port:04X}") and fields[3] in ("01", "08"):
                connections += 1
    alive = [child for child in descendants(pid) if process_alive(child)]  # a zygote reaps lazily
    return fds - 2 * ready, len(alive) - units, connections, info["load"]["idle_executors"]


def _settle(server: Server, most: tuple[int, ...] | None = None, seconds: float = 15) -> tuple[int, ...]:
    """``_held`` once it is steady (two reads alike), or once within ``most``."""
    deadline = time.monotonic() + seconds
    last = _held(server)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = _held(server)
        if (
            (now == last and now[2] == 0)
            if most is None
            else all(a <= b for a, b in zip(now, most, strict=True))
        ):
            return now
        last = now
    return last


def _warm(server: Server) -> None:
    """Every slot busy at once, so that the server keeps ``SLOTS`` executors (as after the soak)."""
    code = {"code": "import time; time.sleep(1.5)"}
    with server.client(timeout=60, limits=httpx.Limits(max_connections=SLOTS)) as client:
        threads = [
            threading.Thread(target=client.post, args=("/v1/run",), kwargs={"json": code})
            for _ in range(SLOTS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert client.get("/v1/info").json()["load"]["idle_executors"] == SLOTS


def test_64_clients_bursts_and_idle_gaps_get_every_answer(tmp_path: Path) -> None:
    from execbox.backends.sandbox import find_bwrap

    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    with running_server(
        "--backend", "sandbox", "--max-concurrency", str(SLOTS), log=tmp_path / "server.log"
    ) as server:
        _warm(server)
        before = _settle(server)
        assert before[2] == 0 and before[3] == SLOTS  # the warm-up's connections closed; its executors kept

        numbers, tally = itertools.count(), Tally()
        clients = [
            threading.Thread(
                target=_client, args=(server, i % 2 == 1, numbers, tally, random.Random(i)), daemon=True
            )
            for i in range(CLIENTS)
        ]
        began = time.monotonic()
        for thread in clients:
            thread.start()
        for thread in clients:
            thread.join(150)
        took = time.monotonic() - began
        assert not any(thread.is_alive() for thread in clients), "a client got no answer in 150 s"

        counts = tally.counts
        summary = f"{dict(counts)} in {took:.1f} s; first problems: {tally.problems[:5]}"
        assert counts["dropped"] == 0, summary
        assert counts["wrong"] == 0, summary
        assert counts["ok"] >= SLOTS and counts["busy"] + counts["ok"] == sum(counts.values()), summary

        after = _settle(server, most=before)
        assert after[3] == before[3], f"executors kept: {before[3]} before, {after[3]} after"
        assert after[2] == 0, f"the server still holds {after[2]} connections the clients closed"
        assert after[0] <= before[0], f"descriptors: {before[0]} before, {after[0]} after ({summary})"
        assert after[1] <= before[1], f"processes: {before[1]} before, {after[1]} after ({summary})"
        log = server.log_text()
        assert "Traceback" not in log and "ERROR" not in log, log[-3000:]
