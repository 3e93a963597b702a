"""The worker processes of ``execbox serve --workers N``: started (spawned,
each given the listening socket, its index, the shared ``Board`` and the
folder of the workers' Unix sockets), one started again in its place when it
dies (what it held given back first: ``Board.reclaim``), and all stopped on
SIGTERM or SIGINT: each gets SIGTERM and uvicorn's graceful shutdown, which
closes its executors; one still there ``STOP_GRACE_S`` later is killed.

A worker whose start failed (its lifespan: exit status 3) stops the server
with the same status, rather than being started again and again."""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.connection
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from ._board import Board
from ._config import ServerConfig
from ._worker import Worker

__all__ = ["STARTUP_FAILURE", "supervise"]

STARTUP_FAILURE = 3
# a worker's graceful shutdown, then its executors closed, before it is killed
STOP_GRACE_S = 40.0
# the least time between two starts of the same worker
RESTART_PAUSE_S = 1.0

log = logging.getLogger("execbox.server.workers")


def supervise(
    config: ServerConfig,
    sock: socket.socket,
    target: Callable[..., None],
    log_level: str,
) -> int:
    """Run ``config.workers`` processes of ``target(config, worker, sock,
    log_level)`` until SIGTERM or SIGINT; the exit status (0, or
    ``STARTUP_FAILURE``)."""
    count = config.workers
    board = Board(count)
    sockets = tempfile.mkdtemp(prefix="execbox-serve-")  # 0700: this user's alone
    context = multiprocessing.get_context("spawn")
    stopping = threading.Event()
    procs: dict[int, Any] = {}
    started_at: dict[int, float] = {}

    def start(index: int) -> None:
        worker = Worker(index, count, board, sockets)
        proc = context.Process(
            target=target, args=(config, worker, sock, log_level), name=f"execbox-serve-worker-{index}"
        )
        proc.start()
        procs[index], started_at[index] = proc, time.monotonic()

    def stop(signum: int, frame: Any) -> None:
        stopping.set()

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    status = 0
    try:
        for index in range(count):
            start(index)
        while not stopping.is_set():
            ended = multiprocessing.connection.wait([proc.sentinel for proc in procs.values()], timeout=0.5)
            if not ended or stopping.wait(0.2):  # a Ctrl-C reaches the workers too: not a crash
                continue
            for index, proc in list(procs.items()):
                if proc.sentinel not in ended:
                    continue
                proc.join()
                if proc.exitcode == STARTUP_FAILURE:
                    log.error("worker %d could not start (said above): stopping the server", index)
                    status = STARTUP_FAILURE
                    stopping.set()
                    break
                log.error(
                    "worker %d exited (status %s): its sessions are lost; starting another",
                    index,
                    proc.exitcode,
                )
                board.reclaim(index)
                time.sleep(max(0.0, started_at[index] + RESTART_PAUSE_S - time.monotonic()))
                start(index)
    finally:
        _stop_all(list(procs.values()))
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        shutil.rmtree(sockets, ignore_errors=True)
    return status


def _stop_all(procs: list[Any]) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
        if proc.is_alive():
            log.error("worker %s did not stop in %g s: killed", proc.name, STOP_GRACE_S)
            proc.kill()
            proc.join(5)
