"""What a server process keeps of finished executions (for replay), within
its byte budgets (``--session-kept-mb``, ``--kept-mb``): held once, the
oldest dropped past a budget, a dropped one answering 410 with the option
to raise, the recent ones replayed whole (security issue 39: kept
executions, up to 5x their cap each, grew the server by 230 MiB)."""

from __future__ import annotations

import asyncio
import gc
import json
import tracemalloc

import httpx
import pytest

from execbox import Limits
from execbox._models import CodeBlock
from execbox.backends import create_executor
from execbox.server._executions import Execution
from execbox.server._kept import Keeper
from tests.server._http import error_of, open_session, running_server

MIB = 1 << 20
PRINTED = 900_000  # under a 1 MiB cap: nothing cut


def prints(n: int, tag: str) -> str:
    return f"import sys\nsys.stdout.write({tag!r} * {n // len(tag)})\n"


def execute(client: httpx.Client, sid: str, code: str) -> str:
    answer = client.post(f"/v1/sessions/{sid}/executions", json={"code": code})
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id"])


def replayed(client: httpx.Client, sid: str, eid: str) -> str:
    """What the execution's stdout events say, replayed from the first (NDJSON)."""
    with client.stream(
        "GET", f"/v1/sessions/{sid}/executions/{eid}/events", headers={"Accept": "application/x-ndjson"}
    ) as response:
        assert response.status_code == 200, response.read()
        lines = [json.loads(line) for line in response.iter_lines() if line]
    assert lines[-1]["event"] == "end" and [line["id"] for line in lines] == list(range(1, len(lines) + 1))
    return "".join(line["data"]["text"] for line in lines if line["event"] == "stdout")


def test_the_oldest_are_dropped_past_each_budget_with_410_naming_the_option() -> None:
    with (
        running_server("--backend", "local", "--session-kept-mb", "2", "--kept-mb", "3") as server,
        server.client(timeout=60.0) as client,
    ):
        one = {"limits": {"max_output_bytes": MIB}}
        a, b = open_session(client, **one)["id"], open_session(client, **one)["id"]
        a1, a2, a3 = (execute(client, a, prints(PRINTED, tag)) for tag in "abc")
        # a's three hold 2.6 MiB, over its 2: its oldest dropped
        error = error_of(client.get(f"/v1/sessions/{a}/executions/{a1}/events"), 410, "execution_gone")
        assert error["reason"] == "session_kept_bytes" and "--session-kept-mb" in error["message"], error
        assert client.get(f"/v1/sessions/{a}").json()["executions"] == [a2, a3]
        b1, b2 = (execute(client, b, prints(PRINTED, tag)) for tag in "de")
        # the process's 3 MiB: the oldest of any session dropped (a2, a's)
        error = error_of(client.get(f"/v1/sessions/{a}/executions/{a2}"), 410, "execution_gone")
        assert error["reason"] == "kept_bytes" and "--kept-mb" in error["message"], error
        for sid, eid, tag in ((a, a3, "c"), (b, b1, "d"), (b, b2, "e")):
            assert replayed(client, sid, eid) == tag * PRINTED
        error_of(client.get(f"/v1/sessions/{a}/executions/e_0000000000000000"), 404, "not_found")

        # a session's latest is kept past its own budget (2 MiB), not past the process's (3 MiB)
        c = open_session(client, limits={"max_output_bytes": 4 * MIB})["id"]
        c1 = execute(client, c, prints(5 * PRINTED // 2, "f"))
        assert replayed(client, c, c1) == "f" * (5 * PRINTED // 2)
        for sid, eid in ((a, a3), (b, b1), (b, b2)):
            error = error_of(client.get(f"/v1/sessions/{sid}/executions/{eid}"), 410, "execution_gone")
            assert error["reason"] == "kept_bytes", error


async def held_by_a_finished_execution(blocks: list[CodeBlock]) -> tuple[int, Execution]:
    """Bytes a finished execution holds (traced), and it."""
    executor = create_executor("local", limits=Limits(max_output_bytes=4 * MIB, timeout_s=60))
    try:
        await executor.arun([CodeBlock("python", "print('warm')")])
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            execution = Execution("s_test", executor, blocks)
            execution.start(lambda _: None)
            await execution.wait()
            await asyncio.sleep(0)  # its end event
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - before, execution
        finally:
            tracemalloc.stop()
    finally:
        await executor.aclose()


@pytest.mark.parametrize("blocks", [1, 2])
def test_a_finished_execution_holds_what_it_printed_once(blocks: int) -> None:
    """2 MiB printed (in one block or two) is held once: not again in its
    events, its result's stdout, or the result's join of its blocks'; and
    it replays as it streamed."""
    share = 2 * MIB // blocks
    code = [CodeBlock("python", prints(share, tag)) for tag in "gh"[:blocks]]
    held, execution = asyncio.run(held_by_a_finished_execution(code))
    assert held < 1.25 * 2 * MIB, f"{held} bytes held for {2 * MIB} printed"
    assert execution.kept_bytes >= held * 0.9, (execution.kept_bytes, held)  # the budgets count what is held
    result = execution.result
    assert result is not None and result.stdout == result.output == "".join(
        t * (share // len(t)) for t in "gh"[:blocks]
    )
    streamed = "".join(item[2]["text"] for item in _events(execution) if item[1] == "stdout")
    assert streamed == result.output


def _events(execution: Execution) -> list[tuple[int, str, dict]]:  # type: ignore[type-arg]
    async def read() -> list[tuple[int, str, dict]]:  # type: ignore[type-arg]
        return [item async for item in execution.stream(0, 1.0) if item is not None]

    return asyncio.run(read())


class _Session:
    def __init__(self, sid: str) -> None:
        self.id, self.executions, self.running, self.kept_bytes, self.ended = sid, {}, None, 0, False


def test_a_session_ended_frees_what_its_executions_held() -> None:
    asyncio.run(_ended())


async def _ended() -> None:
    _, execution = await held_by_a_finished_execution([CodeBlock("python", prints(MIB // 2, "i"))])
    keeper, session = Keeper(4 * MIB, 8 * MIB), _Session("s_one")
    keeper.started(session, execution)  # type: ignore[arg-type]
    keeper.finished(session, execution, execution.kept_bytes)  # type: ignore[arg-type]
    assert keeper.held == session.kept_bytes == execution.kept_bytes > MIB // 2
    keeper.forget(session)  # type: ignore[arg-type]
    assert keeper.held == 0
    keeper.finished(session, execution, execution.kept_bytes)  # type: ignore[arg-type]  # a late end
    assert keeper.held == 0, "an execution that ends after its session is not charged"
