"""The admission counts shared by the worker processes of one server
(``_board.py``), driven through two workers' ``Load`` and ``SessionStore``
on one board: the wake pipes and the shared memory are the real ones, the
two workers share an event loop here instead of running in two processes
(the processes: test_workers.py)."""

from __future__ import annotations

import asyncio

import pytest

from execbox.server._board import Board
from execbox.server._errors import ApiError
from execbox.server._load import Load
from execbox.server._sessions import SessionStore, owner_of, session_id


def two_workers(max_running: int, max_queued: int, max_wait_s: float = 5.0) -> tuple[Load, Load]:
    board = Board(2)
    loads = (
        Load(max_running, max_queued, max_wait_s, board, 0),
        Load(max_running, max_queued, max_wait_s, board, 1),
    )
    for load in loads:
        load.attach(asyncio.get_running_loop())
    return loads


def detach(*loads: Load) -> None:
    for load in loads:
        fd = load.board.wake_fd(load.me)
        if fd is not None:
            asyncio.get_running_loop().remove_reader(fd)


def test_a_slot_freed_in_one_worker_goes_to_the_line_of_another() -> None:
    async def main() -> None:
        first, second = two_workers(1, 4)
        await first.enter()
        waiter = asyncio.create_task(second.enter())
        await asyncio.sleep(0.05)
        assert not waiter.done() and (second.running, second.in_line) == (1, 1)
        first.release()  # handed over the wake pipe
        await asyncio.wait_for(waiter, 2)
        assert (first.running, first.in_line) == (1, 0)
        second.release()
        assert (first.running, second.running) == (0, 0)
        detach(first, second)

    asyncio.run(main())


def test_the_limit_and_the_line_are_the_whole_servers() -> None:
    async def main() -> None:
        first, second = two_workers(2, 1, max_wait_s=0.2)
        await first.enter()
        await second.enter()  # two slots, one in each worker: none left
        queued = asyncio.create_task(first.enter())
        await asyncio.sleep(0.05)
        with pytest.raises(ApiError) as refused:
            await second.enter()  # the line (1) is full, though worker 1 holds none of it
        assert refused.value.status == 429
        with pytest.raises(ApiError):
            await queued  # nothing freed within max_wait_s
        assert (first.running, first.in_line) == (2, 0)
        first.release()
        second.release()
        assert second.running == 0
        detach(first, second)

    asyncio.run(main())


def test_the_longest_waiting_line_gets_the_slot_first() -> None:
    async def main() -> None:
        first, second = two_workers(1, 8)
        await first.enter()
        order: list[str] = []

        async def wait(load: Load, name: str) -> None:
            await load.enter()
            order.append(name)

        tasks = []
        for load, name in ((second, "a"), (first, "b"), (second, "c")):
            tasks.append(asyncio.create_task(wait(load, name)))
            await asyncio.sleep(0.02)
        holder = first
        for _ in range(3):
            holder.release()
            await asyncio.sleep(0.05)
            holder = first if order[-1] == "b" else second
        await asyncio.wait_for(asyncio.gather(*tasks), 2)
        assert order == ["a", "b", "c"]
        holder.release()
        assert first.running == 0
        detach(first, second)

    asyncio.run(main())


def test_a_dead_workers_slots_go_to_the_waiting_lines() -> None:
    async def main() -> None:
        first, second = two_workers(1, 4)
        await first.enter()
        waiter = asyncio.create_task(second.enter())
        await asyncio.sleep(0.05)
        first.board.reclaim(0)  # worker 0 died holding the slot
        await asyncio.wait_for(waiter, 2)
        assert (second.running, second.in_line) == (1, 0)
        detach(first, second)

    asyncio.run(main())


def test_slots_given_and_waiters_gone_count_over_every_worker_and_outlive_a_dead_one() -> None:
    async def main() -> None:
        first, second = two_workers(1, 4)
        await first.enter()
        gone = asyncio.create_task(second.enter())
        served = asyncio.create_task(second.enter())
        await asyncio.sleep(0.05)
        gone.cancel()  # its client left while it waited in worker 1's line
        await asyncio.gather(gone, return_exceptions=True)
        assert (first.admitted, first.abandoned, second.in_line) == (1, 1, 1)
        first.release()  # handed to worker 1's line: its one waiter left is served
        await asyncio.wait_for(served, 2)
        assert (second.admitted, second.abandoned, second.running) == (2, 1, 1)
        second.board.reclaim(1)  # worker 1 died holding the slot: what it counted stays
        assert (first.running, first.admitted, first.abandoned) == (0, 2, 1)
        detach(first, second)

    asyncio.run(main())


def test_sessions_count_over_every_worker_and_name_their_worker() -> None:
    board = Board(2)
    stores = [SessionStore(2, board, 0), SessionStore(2, board, 1)]
    stores[0].reserve()
    stores[1].reserve()
    with pytest.raises(ApiError) as refused:
        stores[0].reserve()
    assert refused.value.status == 429 and stores[1].total() == 2
    stores[1].add(None)  # its making failed: counted out
    stores[0].reserve()
    assert stores[0].total() == 2
    assert [owner_of(session_id(w)) for w in (0, 1, 63)] == [0, 1, 63]
    assert owner_of("s_" + "z" * 24) is None and owner_of("s_00") is None and owner_of("x") is None
