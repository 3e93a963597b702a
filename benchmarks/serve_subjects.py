"""Benchmark worker for ``execbox serve``: one backend, measured in this
process against a real server (``python -m execbox.cli serve``: uvicorn in
a subprocess on a free loopback port), beside the library on the same
backend. Prints one JSON line (run by serve_table.py).

Latency of ``print(1)`` (after warm-up; median and p90), each output checked:
the library's ``executor.run`` on a kept executor; ``POST /v1/run``; a
session's execution answered as JSON; and over server-sent events (until
the ``end`` event). Throughput: ``POST /v1/run`` from 16 and 64 concurrent
clients (asyncio, one httpx connection each; one warm-up run each) until
CALLS correct runs, on a server with the default ``--max-concurrency`` (8)
and on one with 64; a 429 is counted and retried after ``BUSY_RETRY_S``
(the warm-up's 429s are not counted). Batch: one ``/v1/batch`` of
64 requests beside 64 ``/v1/run`` calls one after the other and from as
many concurrent clients as the server runs at once. Abandoned runs (issue
42): on a fresh server at the defaults, 16 clients post ``while True: pass``
(timeout 30 s) to ``/run_code`` and ``/v1/run`` and close their connections
``ABANDON_AFTER_S`` after the server holds them all (8 running, 8 in line:
``/v1/info``, polled for ``HOLD_WAIT_S`` at most); then the seconds a ``print(6*7)`` takes to answer
(target: 3 s), and the server's load after it.

Usage: python serve_subjects.py BACKEND ITERATIONS CALLS
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import httpx

CODE = {"code": "print(1)"}
TOKEN = secrets.token_urlsafe(16)  # the server's, as every client of it sends
AUTH = {"Authorization": f"Bearer {TOKEN}"}
KEY_HEADER = "X-Execbox-Session-Key"
WARMUP = 5
BATCH = 64
BATCH_REPEATS = 3
DEFAULT_CONCURRENCY = 8  # execbox serve's --max-concurrency default
BUSY_RETRY_S = 0.01  # a client honouring Retry-After (1 s) would wait that long instead
CLIENTS = (16, 64)
ABANDONED = 16  # endless runs whose clients leave
ABANDON_AFTER_S = 1.0
HOLD_WAIT_S = 30.0
ENDLESS = "while True: pass"


def describe(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[-1]}" if lines else type(exc).__name__


def figures(times: list[float], wrong: int, first_wrong: str | None) -> dict:
    ordered = sorted(times)
    out = {
        "median_ms": statistics.median(ordered),
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))],
        "n": len(ordered),
        "wrong": wrong,
    }
    if first_wrong:
        out["first_wrong"] = first_wrong
    return out


def latency(call: Callable[[], str], iterations: int) -> dict:
    """``call()`` returns the run's stdout; anything but ``1\\n`` (or a raise) is wrong."""
    for _ in range(WARMUP):
        call()
    times, wrong, first = [], 0, None
    for _ in range(iterations):
        started = time.perf_counter()
        try:
            out = call()
        except Exception as exc:  # noqa: BLE001 - counted, not fatal
            out = describe(exc)
        times.append((time.perf_counter() - started) * 1000)
        if out != "1\n":
            wrong += 1
            first = first or out[:200]
    return figures(times, wrong, first)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_PIDS: dict[str, int] = {}


def server_pid(url: str) -> int:
    """The process of the server ``server`` started at ``url`` (its CPU time: scale_subjects.py)."""
    return _PIDS[url]


@contextmanager
def server(backend: str, max_concurrency: int, *extra: str) -> Iterator[str]:
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "execbox.cli",
            "serve",
            "--port",
            str(port),
            "--backend",
            backend,
            "--max-concurrency",
            str(max_concurrency),
            f"--token={TOKEN}",
            *extra,
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    url = f"http://127.0.0.1:{port}"
    _PIDS[url] = proc.pid
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                log.seek(0)
                tail = log.read().decode(errors="replace").strip().splitlines()
                raise RuntimeError(f"execbox serve exited: {tail[-1] if tail else proc.returncode}")
            try:
                if httpx.get(f"{url}/openapi.json", headers=AUTH, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("execbox serve did not answer within 30 s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def library(backend: str, iterations: int) -> dict:
    import execbox

    with execbox.create_executor(backend) as executor:
        return latency(lambda: executor.run(execbox.CodeBlock("python", "print(1)")).stdout, iterations)


def service_latencies(client: httpx.Client, iterations: int) -> dict:
    def run() -> str:
        return client.post("/v1/run", json=CODE).json()["stdout"]

    made = client.post("/v1/sessions", json={})
    made.raise_for_status()
    sid, key = made.json()["id"], {KEY_HEADER: made.json()["key"]}

    def session_json() -> str:
        return client.post(f"/v1/sessions/{sid}/executions", json=CODE, headers=key).json()["result"][
            "stdout"
        ]

    def session_sse() -> str:
        with client.stream(
            "POST",
            f"/v1/sessions/{sid}/executions",
            json=CODE,
            headers={"Accept": "text/event-stream", **key},
        ) as response:
            event = None
            for line in response.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event == "end":
                    return json.loads(line[6:])["result"]["stdout"]
        return "(no end event)"

    try:
        return {
            "run": latency(run, iterations),
            "session_json": latency(session_json, iterations),
            "session_sse": latency(session_sse, iterations),
        }
    finally:
        client.delete(f"/v1/sessions/{sid}", headers=key)


async def _throughput(url: str, clients: int, calls: int) -> dict:
    """``clients`` coroutines post /v1/run until ``calls`` runs came back right."""
    counts = {"correct": 0, "busy": 0, "wrong": 0}
    first: list[str] = []
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120, headers=AUTH) as client:

        async def one_client() -> None:
            while counts["correct"] < calls:
                try:
                    response = await client.post("/v1/run", json=CODE)
                    if response.status_code == 429:
                        counts["busy"] += 1
                        await asyncio.sleep(BUSY_RETRY_S)
                        continue
                    ok = response.status_code == 200 and response.json()["stdout"] == "1\n"
                    what = f"{response.status_code}: {response.text[:200]}"
                except Exception as exc:  # noqa: BLE001 - counted, not fatal
                    ok, what = False, describe(exc)
                if ok:
                    counts["correct"] += 1
                else:
                    counts["wrong"] += 1
                    first[:] = first or [what]

        # Warm-up: as many runs at once as there are clients, so that the server's kept executors
        # are started (a new sandbox executor takes about 100 ms to start) before the clock runs.
        await asyncio.gather(*(client.post("/v1/run", json=CODE) for _ in range(clients)))
        started = time.perf_counter()
        await asyncio.gather(*(one_client() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "correct_per_s": counts["correct"] / elapsed,
        "elapsed_s": elapsed,
        **counts,
        **({"first_wrong": first[0]} if first else {}),
    }


def library_throughput(backend: str, calls: int) -> list[dict]:
    """The floor: ``clients`` threads calling one kept executor's ``run``
    until ``calls`` runs came back right (no HTTP, the same backend)."""
    import execbox
    from concurrent.futures import ThreadPoolExecutor

    out = []
    with execbox.create_executor(backend) as executor:
        block = execbox.CodeBlock("python", "print(1)")
        executor.run(block)  # started before the clock runs
        for clients in CLIENTS:
            counts = {"correct": 0, "busy": 0, "wrong": 0}

            def one_client() -> None:
                while counts["correct"] + counts["wrong"] < calls:
                    ok = executor.run(block).stdout == "1\n"
                    counts["correct" if ok else "wrong"] += 1

            started = time.perf_counter()
            with ThreadPoolExecutor(clients) as pool:
                for future in [pool.submit(one_client) for _ in range(clients)]:
                    future.result()
            elapsed = time.perf_counter() - started
            out.append(
                {
                    "clients": clients,
                    "correct_per_s": counts["correct"] / elapsed,
                    "elapsed_s": elapsed,
                    **counts,
                }
            )
    return out


def throughput(url: str, calls: int) -> list[dict]:
    return [asyncio.run(_throughput(url, clients, calls)) for clients in CLIENTS]


def batch(client: httpx.Client, url: str, width: int) -> dict:
    """Wall time of 64 print(1) runs three ways (median of BATCH_REPEATS)."""

    def one_batch() -> int:
        with client.stream("POST", "/v1/batch", json={"requests": [CODE] * BATCH}) as response:
            return sum(
                json.loads(line).get("stdout") == "1\n" for line in response.iter_lines() if line.strip()
            )

    def sequential() -> int:
        return sum(client.post("/v1/run", json=CODE).json().get("stdout") == "1\n" for _ in range(BATCH))

    def concurrent() -> int:
        async def go() -> int:
            limits = httpx.Limits(max_connections=width)
            async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120, headers=AUTH) as aclient:
                gate = asyncio.Semaphore(width)

                async def one() -> bool:
                    async with gate:
                        response = await aclient.post("/v1/run", json=CODE)
                        return response.status_code == 200 and response.json()["stdout"] == "1\n"

                return sum(await asyncio.gather(*(one() for _ in range(BATCH))))

        return asyncio.run(go())

    out = {}
    for name, how in (("batch", one_batch), ("sequential", sequential), ("concurrent", concurrent)):
        how()  # warm-up: the pool's executors started
        walls, correct = [], []
        for _ in range(BATCH_REPEATS):
            started = time.perf_counter()
            correct.append(how())
            walls.append((time.perf_counter() - started) * 1000)
        out[name] = {
            "wall_ms": statistics.median(walls),
            "runs": BATCH,
            "wrong": BATCH * BATCH_REPEATS - sum(correct),
        }
    out["width"] = width
    return out


def abandoned(url: str) -> dict:
    """``ABANDONED`` endless runs whose clients leave after ``ABANDON_AFTER_S``
    (raw sockets, closed unread), then ``print(6*7)``: seconds to its answer."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    gone = []
    for i in range(ABANDONED):
        route, body = (
            ("/run_code", {"code": ENDLESS, "language": "python", "run_timeout": 30})
            if i % 2
            else ("/v1/run", {"code": ENDLESS, "limits": {"timeout_s": 30}})
        )
        data = json.dumps(body).encode()
        sock = socket.create_connection((host, int(port)), timeout=10)
        sock.sendall(
            f"POST {route} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n".encode()
            + f"Authorization: Bearer {TOKEN}\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        gone.append(sock)
    with httpx.Client(base_url=url, timeout=60, headers=AUTH) as client:
        deadline, held = time.monotonic() + HOLD_WAIT_S, False
        while not held and time.monotonic() < deadline:
            load = client.get("/v1/info").json()["load"]
            held = load["running"] + load["queued"] >= ABANDONED
            time.sleep(0.05)
        time.sleep(ABANDON_AFTER_S)
        for sock in gone:
            sock.close()
        started = time.perf_counter()
        answer = client.post("/v1/run", json={"code": "print(6*7)"})
        seconds = time.perf_counter() - started
        right = answer.status_code == 200 and answer.json().get("stdout") == "42\n"
        load = client.get("/v1/info").json()["load"]
    return {
        "clients": ABANDONED,
        "held": held,  # the server held them all before they left
        "after_s": ABANDON_AFTER_S,
        "answer_s": seconds,
        "right": right,
        **({} if right else {"answer": f"{answer.status_code}: {answer.text[:200]}"}),
        "load_after": {k: load.get(k) for k in ("running", "queued", "admitted", "abandoned")},
    }


def main() -> None:
    backend, iterations, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    report: dict = {
        "subject": backend,
        "max_concurrency": DEFAULT_CONCURRENCY,
        "busy_retry_s": BUSY_RETRY_S,
        "cpus": os.cpu_count(),
    }
    step = "library"
    try:
        report["library"] = library(backend, iterations)
        step = "library throughput"
        report["throughput_library"] = library_throughput(backend, calls)
        step = f"server (--max-concurrency {DEFAULT_CONCURRENCY})"
        with (
            server(backend, DEFAULT_CONCURRENCY) as url,
            httpx.Client(base_url=url, timeout=120, headers=AUTH) as client,
        ):
            step = "latency through the server"
            report.update(service_latencies(client, iterations))
            step = "throughput"
            report["throughput"] = throughput(url, calls)
            step = "batch"
            report["batch"] = batch(client, url, DEFAULT_CONCURRENCY)
        step = "abandoned endless runs, a fresh server at the defaults"
        with server(backend, DEFAULT_CONCURRENCY) as url:
            report["abandoned"] = abandoned(url)
        step = "server (--max-concurrency 64)"
        with server(backend, max(CLIENTS)) as url:
            step = "throughput, --max-concurrency 64"
            report["throughput_wide"] = throughput(url, calls)
    except Exception as exc:  # noqa: BLE001 - the row says why
        report["error"] = f"{step}: {describe(exc)}"
    print(json.dumps(report))


if __name__ == "__main__":
    main()
