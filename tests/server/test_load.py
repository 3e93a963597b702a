"""``_load.Load``, the server's admission, on a real event loop: slots, the
bounded line (first come, first served), its deadline, the hand-over of a
freed slot, and the Retry-After computed from the line."""

from __future__ import annotations

import asyncio

import pytest

from execbox.server._errors import ApiError
from execbox.server._load import MAX_RETRY_AFTER_S, Load


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_slots_then_the_line_in_order_then_429_at_once():
    async def main() -> None:
        load = Load(2, max_queued=2, max_wait_s=5)
        await load.enter()
        await load.enter()
        order: list[int] = []

        async def wait(n: int) -> None:
            await load.enter()
            order.append(n)

        waiters = [asyncio.create_task(wait(n)) for n in (1, 2)]
        await asyncio.sleep(0.01)
        assert (load.running, load.queued, load.in_line) == (2, 2, 2)
        with pytest.raises(ApiError) as refused:
            await load.enter()  # the line is full: at once
        assert refused.value.status == 429 and "--max-queue 2" in refused.value.message
        assert int(refused.value.headers["Retry-After"]) >= 1
        load.release()
        await asyncio.sleep(0.01)
        assert order == [1] and load.running == 2  # handed over: the slot never went free
        load.release()
        await asyncio.gather(*waiters)
        assert order == [1, 2] and (load.running, load.queued) == (2, 0)
        load.release()
        load.release()
        assert load.running == 0

    run(main())


def test_a_late_caller_does_not_overtake_the_line():
    async def main() -> None:
        load = Load(1, max_queued=4, max_wait_s=5)
        await load.enter()
        first = asyncio.create_task(load.enter())
        await asyncio.sleep(0.01)
        load.release()  # handed to the first in line, not left free for the next caller
        late = asyncio.create_task(load.enter())
        await asyncio.sleep(0.01)
        assert first.done() and not late.done() and load.running == 1
        load.release()
        await late
        load.release()
        assert load.running == 0

    run(main())


def test_a_wait_past_its_deadline_is_429_and_leaves_the_line():
    async def main() -> None:
        load = Load(1, max_queued=4, max_wait_s=0.2)
        await load.enter()
        with pytest.raises(ApiError) as refused:
            await load.enter()
        assert refused.value.status == 429 and "0.2 s" in refused.value.message
        assert (load.in_line, load.running, load.longest_wait_s()) == (0, 1, 0.0)
        load.release()
        assert load.running == 0

    run(main())


def test_a_cancelled_waiter_that_was_handed_a_slot_passes_it_on():
    async def main() -> None:
        load = Load(1, max_queued=4, max_wait_s=5)
        await load.enter()
        gone = asyncio.create_task(load.enter())
        nxt = asyncio.create_task(load.enter())
        await asyncio.sleep(0.01)
        load.release()  # handed to ``gone``...
        gone.cancel()  # ...which is cancelled before it ran on
        with pytest.raises(asyncio.CancelledError):
            await gone
        await asyncio.wait_for(nxt, 1)  # the slot went on to the next
        assert (load.running, load.in_line) == (1, 0)
        load.release()
        assert load.running == 0

    run(main())


def test_a_waiter_cancelled_in_line_never_runs_and_is_counted_abandoned():
    async def main() -> None:
        load = Load(1, max_queued=4, max_wait_s=5)
        ran: list[str] = []

        async def work(name: str) -> str:
            ran.append(name)
            return name

        await load.enter()
        gone = asyncio.create_task(load.in_slot(lambda: work("gone")))
        served = asyncio.create_task(load.in_slot(lambda: work("served")))
        await asyncio.sleep(0.01)
        gone.cancel()  # its client left while it waited: out of the line at once, the slot still held
        with pytest.raises(asyncio.CancelledError):
            await gone
        assert (load.running, load.in_line, load.abandoned) == (1, 1, 1)
        load.release()
        assert await asyncio.wait_for(served, 1) == "served"
        assert ran == ["served"] and (load.running, load.admitted) == (0, 2)

    run(main())


def test_acquire_waits_without_a_deadline_and_counts_as_queued():
    async def main() -> None:
        load = Load(1, max_queued=0, max_wait_s=0.05)
        await load.enter()
        batch_item = asyncio.create_task(load.acquire())
        await asyncio.sleep(0.2)  # past max_wait_s: acquire has none
        assert not batch_item.done() and load.queued == 1 and load.longest_wait_s() > 0.1
        with pytest.raises(ApiError):
            await load.enter()  # max_queued 0: refused at once
        load.release()
        await batch_item
        load.release()
        assert (load.running, load.queued) == (0, 0)

    run(main())


def test_retry_after_is_the_line_over_the_pace_of_freed_slots():
    async def main() -> None:
        load = Load(1, max_queued=100, max_wait_s=30)
        assert load.retry_after_s() == 1  # no pace known yet
        for second in range(5):  # one slot freed a second
            load.board.remember_release(second * 10**9)
        await load.enter()
        waiters = [asyncio.create_task(load.enter()) for _ in range(9)]
        await asyncio.sleep(0.01)
        assert load.retry_after_s() == 10  # 9 in line and the caller, at 1/s
        load.board.forget_releases()
        load.board.remember_release(0)
        load.board.remember_release(1000 * 10**9)
        assert load.retry_after_s() == MAX_RETRY_AFTER_S  # bounded
        for task in waiters:
            task.cancel()
        await asyncio.gather(*waiters, return_exceptions=True)
        assert (load.in_line, load.running) == (0, 1)

    run(main())
