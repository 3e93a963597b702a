"""A tenant that prints gigabytes under a small output cap must not grow
the server: a real ``execbox serve`` on loopback, one worker and two, a
session's block printing 1 GiB under ``max_output_bytes`` = 1 MiB (read
as server-sent events, as a browser would), and the server's processes'
peak resident memory (``VmHWM`` in /proc) measured before and after.
Another session on the same worker must still answer (security issue 39:
the server grew from 45 to 704 MiB for 512 MiB printed; under a memory
limit the worker was killed and every session on it lost)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.server._http import Server, descendants, running_server

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
