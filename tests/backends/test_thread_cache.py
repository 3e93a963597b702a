"""The threads ``arun`` hands block loops to (``backends/_thread_cache``):
reused when idle, never a run queued behind another, none left after their
idle time, and a forked child that starts with none of the parent's."""

from __future__ import annotations

import os
import threading
import time

import pytest

from execbox.backends import _thread_cache


def ran_in(job_count: int) -> list[int]:
    """Run ``job_count`` jobs, each noting its thread; wait for all."""
    seen: list[int] = []
    done = threading.Semaphore(0)

    def job() -> None:
        seen.append(threading.get_ident())
        done.release()

    for _ in range(job_count):
        _thread_cache.run_in_thread(job)
    for _ in range(job_count):
        assert done.acquire(timeout=10), "a job never ran"
    return seen


def test_an_idle_thread_takes_the_next_run() -> None:
    first = ran_in(1)
    time.sleep(0.05)  # back in the idle list
    assert ran_in(1) == first


def test_a_run_never_waits_behind_another() -> None:
    hold = threading.Event()
    started = threading.Semaphore(0)
    threads: set[int] = set()

    def job() -> None:
        threads.add(threading.get_ident())
        started.release()
        hold.wait(10)

    try:
        for _ in range(4):
            _thread_cache.run_in_thread(job)
        # all four start while none may finish: no run waits for another's thread
        assert all(started.acquire(timeout=10) for _ in range(4)), "a run waited behind a held one"
        assert len(threads) == 4
    finally:
        hold.set()


def test_an_idle_thread_ends_after_its_idle_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_thread_cache, "IDLE_S", 0.1)
    ident = ran_in(1)[0]  # a new thread only if none was idle; wait for every idle one to end
    deadline = time.monotonic() + 40
    while any(t.ident == ident for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.ident == ident for t in threading.enumerate())


def test_a_forked_child_starts_with_no_threads_of_the_parent() -> None:
    ran_in(2)
    time.sleep(0.05)
    assert _thread_cache._idle  # the parent keeps idle threads
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its jobs must run, though the parent's threads are not here
        os.close(read)
        try:
            ok = not _thread_cache._idle and len(ran_in(1)) == 1
        except BaseException:  # noqa: BLE001 - any failure in the child is a failed check
            ok = False
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    said = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert said == b"1"
