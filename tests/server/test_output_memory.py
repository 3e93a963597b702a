"""A tenant that prints gigabytes under a small output cap must not grow
the server: a real ``execbox serve`` on loopback, one worker and two, a
session's block printing 1 GiB under ``max_output_bytes`` = 1 MiB (read
as server-sent events, as a browser would), and the server's processes'
peak resident memory (``VmHWM`` in /proc) measured before and after.
Another session on the same worker must still answer (security issue 39:
the server grew from 45 to 704 MiB for 512 MiB printed; under a memory
limit the worker was killed and every session on it lost)."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.server._http import Server, descendants, error_of, running_server

# measures the memory of a load it makes; a gigabyte through a pipe takes seconds
pytestmark = [pytest.mark.slow, pytest.mark.alone]

MIB = 1 << 20
CAP = 1 * MIB
PRINTED_MIB = 1024
GROWTH_MIB = 64  # the bound: flat within 64 MiB
WORKER = "x-execbox-worker"
FLOOD = (
    "import sys\nchunk = b'x' * (1 << 20)\n"
    f"for _ in range({PRINTED_MIB}):\n    sys.stdout.buffer.write(chunk)\n"
    "sys.stdout.flush()\nsys.stderr.write('done\\n')\n"
)


def peak_mib(pid: int) -> int | None:
    """The process's peak resident memory (VmHWM), None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return None


def server_processes(server: Server) -> dict[int, int]:
    """The server's processes (itself, its workers, their helpers) and their peaks now."""
    found = {}
    for pid in [server.proc.pid, *descendants(server.proc.pid)]:
        peak = peak_mib(pid)
        if peak is not None:
            found[pid] = peak
    return found


@contextmanager
def served(workers: int) -> Iterator[tuple[Server, httpx.Client]]:
    with running_server("--backend", "local", "--workers", str(workers), "--max-concurrency", "4") as server:
        # one kept connection: every session it opens lives in the worker it reached
        with server.client(limits=httpx.Limits(max_connections=1), timeout=120.0) as client:
            yield server, client


def open_session(client: httpx.Client) -> str:
    made = client.post("/v1/sessions", json={"limits": {"max_output_bytes": CAP, "timeout_s": 120}})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def run(client: httpx.Client, sid: str, code: str) -> dict:  # type: ignore[type-arg]
    answer = client.post(f"/v1/sessions/{sid}/executions", json={"code": code})
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("workers", [1, 2])
def test_a_gigabyte_printed_under_a_small_cap_leaves_the_server_flat(workers: int) -> None:
    with served(workers) as (server, client):
        flooding, neighbour = open_session(client), open_session(client)
        assert flooding[2:4] == neighbour[2:4], "both sessions live in one worker"
        for sid in (flooding, neighbour):
            assert run(client, sid, "print('warm')")["result"]["output"] == "warm\n"
        before = server_processes(server)
        assert len(before) >= 1 + (workers if workers > 1 else 0), before

        streamed = 0
        events: list[str] = []
        with client.stream(
            "POST",
            f"/v1/sessions/{flooding}/executions",
            json={"code": FLOOD},
            headers={"Accept": "text/event-stream"},
        ) as stream:
            assert stream.status_code == 200
            eid = stream.headers["X-Execution-Id"]
            for line in stream.iter_lines():
                streamed += len(line) + 1
                if line.startswith("event: "):
                    events.append(line[len("event: ") :])
        assert events[-1] == "end" and events.count("truncated") == 1, events[-5:]
        # the text streamed is the cap's, with the event framing and the end's capped result
        assert streamed < 8 * CAP, f"{streamed} bytes streamed for a {CAP}-byte cap"
        summary = client.get(f"/v1/sessions/{flooding}/executions/{eid}").json()
        output = summary["result"]["output"]
        assert summary["result"]["truncated"] and "bytes of output dropped" in output, output[-300:]
        assert len(output) < 2 * CAP and output.endswith("done\n"), output[-300:]

        after = server_processes(server)
        grown = {pid: after[pid] - peak for pid, peak in before.items() if pid in after}
        assert set(grown) == set(before), f"a server process died: before {before}, after {after}"
        assert max(grown.values()) < GROWTH_MIB, (
            f"the server's processes' peak memory grew by {grown} MiB (before {before}) "
            f"while a block printed {PRINTED_MIB} MiB under a {CAP}-byte cap"
        )
        assert run(client, neighbour, "print('still here')")["result"]["output"] == "still here\n"
        assert os.path.exists(f"/proc/{server.proc.pid}")


KEPT_FLOODS = 5  # per session, four sessions: 20 floods
KEPT_FLOOD_MIB = 64


def flood(mib: int) -> str:
    return FLOOD.replace(f"range({PRINTED_MIB})", f"range({mib})")


def memory_mib(pid: int) -> tuple[int, int] | None:
    """The process's resident memory now and at its peak (VmRSS, VmHWM), None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    found = {
        line.split(":")[0]: int(line.split()[1]) // 1024
        for line in text.splitlines()
        if line.startswith(("VmRSS:", "VmHWM:"))
    }
    return found["VmRSS"], found["VmHWM"]


def sse_lines(client: httpx.Client, method: str, url: str, **kwargs: Any) -> tuple[list[str], str]:
    """The raw lines of an event stream (ids, names, data as sent), and its execution's id."""
    with client.stream(method, url, headers={"Accept": "text/event-stream"}, **kwargs) as stream:
        assert stream.status_code == 200, stream.read()
        return [line for line in stream.iter_lines() if not line.startswith(":")], stream.headers[
            "X-Execution-Id"
        ]


@pytest.mark.parametrize("workers", [1, 2])
def test_twenty_floods_in_four_sessions_leave_each_server_process_flat(workers: int) -> None:
    """Kept executions (for replay) add up: 20 floods of 64 MiB under a
    1 MiB cap in four sessions at once, and each server process's resident
    memory (now and at its peak) grows by less than 64 MiB. The oldest
    kept execution is dropped past the budget (410 naming the option to
    raise), the latest replays whole, event for event."""
    with running_server("--backend", "local", "--workers", str(workers), "--max-concurrency", "4") as server:
        clients = [server.client(limits=httpx.Limits(max_connections=1), timeout=300.0) for _ in range(4)]
        try:
            sessions = [open_session(client) for client in clients]
            for client, sid in zip(clients, sessions, strict=True):
                assert run(client, sid, "print('warm')")["result"]["output"] == "warm\n"
            before = {pid: memory_mib(pid) for pid in [server.proc.pid, *descendants(server.proc.pid)]}
            ids: list[list[str]] = [[] for _ in sessions]
            last: list[str] = []
            failed: list[BaseException] = []

            def tenant(n: int) -> None:
                client, sid = clients[n], sessions[n]
                try:
                    for i in range(KEPT_FLOODS):
                        if n == 0 and i == KEPT_FLOODS - 1:  # the latest: streamed, to replay later
                            lines, eid = sse_lines(
                                client,
                                "POST",
                                f"/v1/sessions/{sid}/executions",
                                json={"code": flood(KEPT_FLOOD_MIB)},
                            )
                            last.extend(lines)
                        else:
                            eid = run(client, sid, flood(KEPT_FLOOD_MIB))["id"]
                        ids[n].append(eid)
                except BaseException as exc:  # noqa: BLE001 - said by the test's thread
                    failed.append(exc)

            threads = [threading.Thread(target=tenant, args=(n,)) for n in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not failed, failed
            after = {pid: memory_mib(pid) for pid in before}
            table = {pid: (before[pid], after[pid]) for pid in before}
            print(f"memory (VmRSS, VmHWM) MiB before, after: {table}")
            grown = {
                pid: (now[0] - was[0], now[1] - was[1])
                for pid, (was, now) in table.items()
                if was is not None and now is not None
            }
            assert len(grown) == len([m for m in before.values() if m is not None]), (
                f"a process died: {table}"
            )
            assert max(max(g) for g in grown.values()) < GROWTH_MIB, (
                f"the server's processes' memory (VmRSS, VmHWM) grew by {grown} MiB (before, after: {table}) "
                f"for 20 floods of {KEPT_FLOOD_MIB} MiB under a {CAP}-byte cap in four sessions"
            )

            client, sid = clients[0], sessions[0]
            replay, _ = sse_lines(client, "GET", f"/v1/sessions/{sid}/executions/{ids[0][-1]}/events")
            names = [line for line in last if line.startswith("event: ")]
            assert names[-1] == "event: end" and names.count("event: truncated") == 1, names[-3:]
            assert replay == last, (
                f"the replay differs from the stream: {len(replay)} lines, {len(last)} streamed"
            )
            gone = client.get(f"/v1/sessions/{sid}/executions/{ids[0][0]}/events")
            error = error_of(gone, 410, "execution_gone")
            assert "--session-kept-mb" in error["message"] or "--kept-mb" in error["message"], error
        finally:
            for client in clients:
                client.close()


def one_stream_flood(mib: int) -> str:
    """A flood that ends on stdout: its output is the one text (its stdout the same string)."""
    return flood(mib).replace("sys.stderr.write", "sys.stdout.write")


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize(
    ("cap_mib", "floods", "printed_mib"),
    [(1, 8, PRINTED_MIB), (16, 4, 256)],
    ids=["8-floods-1MiB-cap", "4-floods-16MiB-cap"],
)
def test_floods_at_once_hold_their_output_about_once(
    workers: int, cap_mib: int, floods: int, printed_mib: int
) -> None:
    """Floods running at once (``--max-concurrency`` of them, each in its
    session, half answered as JSON and half as server-sent events): each
    server process's peak resident memory grows by less than 64 MiB under
    a 1 MiB cap, and by less than three times the caps running at once
    (plus 32 MiB) under a 16 MiB cap. A running flood's output was held
    about 8 times (two captures of 2.5 times its cap, the result's texts,
    the answer's JSON made whole, then encoded): 4 floods under a 16 MiB
    cap grew a worker by 491 MiB."""
    cap = cap_mib * MIB
    bound = GROWTH_MIB if cap_mib == 1 else 3 * cap_mib * floods + 32
    with running_server(
        "--backend", "local", "--workers", str(workers), "--max-concurrency", str(floods)
    ) as server:
        clients = [
            server.client(limits=httpx.Limits(max_connections=1), timeout=300.0) for _ in range(floods)
        ]
        try:
            sessions = []
            for client in clients:
                made = client.post(
                    "/v1/sessions", json={"limits": {"max_output_bytes": cap, "timeout_s": 300}}
                )
                assert made.status_code == 201, made.text
                sessions.append(str(made.json()["id"]))
                assert run(client, sessions[-1], "print('warm')")["result"]["output"] == "warm\n"
            before = {pid: memory_mib(pid) for pid in [server.proc.pid, *descendants(server.proc.pid)]}
            outputs: dict[int, str] = {}
            failed: list[BaseException] = []

            def tenant(n: int) -> None:
                client, url = clients[n], f"/v1/sessions/{sessions[n]}/executions"
                code = {"code": one_stream_flood(printed_mib) if n % 4 == 3 else flood(printed_mib)}
                try:
                    if n % 2:  # the end event's result, as a browser reads it
                        lines, _ = sse_lines(client, "POST", url, json=code)
                        end = json.loads([line for line in lines if line.startswith("data: ")][-1][6:])
                        outputs[n] = end["result"]["output"]
                    else:
                        outputs[n] = run(client, sessions[n], code["code"])["result"]["output"]
                except BaseException as exc:  # noqa: BLE001 - said by the test's thread
                    failed.append(exc)

            threads = [threading.Thread(target=tenant, args=(n,)) for n in range(floods)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert not failed, failed
            for output in outputs.values():
                assert "bytes of output dropped" in output and output.endswith("done\n"), output[-300:]
                assert len(output) < cap + 1024
            after = {pid: memory_mib(pid) for pid in before}
            table = {pid: (before[pid], after[pid]) for pid in before}
            grown = {
                pid: now[1] - was[1]
                for pid, (was, now) in table.items()
                if was is not None and now is not None
            }
            assert len(grown) == len([m for m in before.values() if m is not None]), (
                f"a process died: {table}"
            )
            print(f"peak growth MiB per process: {grown} (VmRSS, VmHWM before, after: {table})")
            assert max(grown.values()) < bound, (
                f"the server's processes' peak memory grew by {grown} MiB (before, after: {table}) for "
                f"{floods} floods of {printed_mib} MiB at once under a {cap_mib} MiB cap: over {bound} MiB"
            )
        finally:
            for client in clients:
                client.close()
