"""One block as a ``docker exec`` in a running container: output, deadline,
cancellation, and no process left behind inside the container.

The block runs under a small ``sh`` wrapper that carries a random token in
its environment. When the block's command returns, the wrapper counts the
container's processes (a glob over /proc, no fork); only when more than the
container's own are left does it run the in-container killer, which kills
every process carrying the token, every orphan (adopted by the container's
init) that carries no other block's token, and their descendants. On a
timeout or a cancellation the same killer runs in an exec of its own; if
even that cannot start (a fork bomb has used up the pids limit), the
container itself is killed.

The engine multiplexes stdout and stderr on one socket; a pump thread
splits it into two pipes so that the shared ``watch`` loop (deadline,
cancellation, bounded capture) does the rest.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._process import TOKEN_VAR, Cancellation, OutputCallback, ProcessOutcome, new_token, watch

__all__ = ["KILLER", "ContainerGone", "memory_kills", "run_exec"]

# Runs "$@", then, if anything besides init, the keep-alive and itself is
# left in the container, the killer (which spares the wrapper, its parent,
# so that the block's exit status survives).
WRAPPER = r"""
"$@"
rc=$?
set -- /proc/[0-9]*
if [ $# -gt 3 ]; then
    python3 -c "$EXECBOX_KILLER" "$EXECBOX_RUN_TOKEN" 2>/dev/null
fi
exit $rc
"""

# argv: the block's token. Spares init, the keep-alive (init's oldest
# child), itself and its parent; kills until nothing more is found.
KILLER = r"""
import os, signal, sys
mark = b"EXECBOX_RUN_TOKEN=" + sys.argv[1].encode()
for _ in range(100):
    parent, born, doomed = {}, {}, set()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) in (1, os.getpid(), os.getppid()):
            continue
        pid = int(name)
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            parent[pid], born[pid] = int(fields[1]), int(fields[19])
        except (OSError, ValueError, IndexError):
            continue
        try:
            with open("/proc/%d/environ" % pid, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            env = None
        if env is not None and mark in env:
            doomed.add(pid)
        elif parent[pid] == 1 and (env is None or not any(e.startswith(b"EXECBOX_RUN_TOKEN=") for e in env)):
            doomed.add(pid)
    adopted = [pid for pid in parent if parent[pid] == 1]
    if adopted:
        doomed.discard(min(adopted, key=lambda pid: (born[pid], pid)))  # the keep-alive
    grew = True
    while grew:
        grew = False
        for pid, ppid in parent.items():
            if ppid in doomed and pid not in doomed:
                doomed.add(pid)
                grew = True
    if not doomed:
        break
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
"""

_HEADER = struct.Struct(">BxxxL")


class ContainerGone(Exception):
    """The container stopped (or vanished) under a block."""


def run_exec(client: Any, container_id: str, argv: Sequence[str], *, env: dict[str, str], workdir: str,
             timeout_s: float, output_limit: int, cancel: Cancellation | None,
             on_output: OutputCallback | None, kill_container: Callable[[], None]
             ) -> ProcessOutcome:
    """Run ``argv`` in the container; exit codes as ``run_process`` gives
    them (124 on timeout). Raises ContainerGone if the container is not
    running."""
    import docker  # type: ignore[import-untyped]

    token = new_token()
    started = time.monotonic()
    environment = {**env, TOKEN_VAR: token, "EXECBOX_KILLER": KILLER}
    try:
        exec_id = client.api.exec_create(container_id, ["/bin/sh", "-c", WRAPPER, "execbox", *argv],
                                         environment=environment, workdir=workdir)["Id"]
        sock = client.api.exec_start(exec_id, socket=True)
    except docker.errors.NotFound as exc:
        raise ContainerGone(str(exc.explanation or exc)) from None
    except docker.errors.APIError as exc:
        if exc.status_code == 409:  # "container ... is not running"
            raise ContainerGone(str(exc.explanation or exc)) from None
        raise
    stream = _Stream(sock, lambda: _kill_block(client, container_id, token, kill_container))
    try:
        capture, timed_out, cancelled = watch(
            stream.out_r, stream.err_r, stream, deadline=started + timeout_s, output_limit=output_limit,
            cancel=cancel, on_output=on_output)
    finally:
        stream.close()
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except docker.errors.APIError:
        code = None
    if code is None:
        code = 137  # the container went away under it
    if timed_out:
        code = 124
    return ProcessOutcome(code, capture, timed_out, cancelled, time.monotonic() - started)


def memory_kills(client: Any, container_id: str) -> int | None:
    """How many times the kernel's OOM killer has struck in the container
    (cgroup v1 or v2), or None when it cannot be read."""
    try:
        out = client.api.exec_create(container_id, ["/bin/sh", "-c",
                                     "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || "
                                     "cat /sys/fs/cgroup/memory.events 2>/dev/null"])
        text = client.api.exec_start(out["Id"]).decode(errors="replace")
    except Exception:  # noqa: BLE001 - a best-effort reading
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def _kill_block(client: Any, container_id: str, token: str, kill_container: Callable[[], None]) -> None:
    try:
        out = client.api.exec_create(container_id, ["python3", "-c", KILLER, token])
        client.api.exec_start(out["Id"])
        if client.api.exec_inspect(out["Id"]).get("ExitCode") == 0:
            return
    except Exception:  # noqa: BLE001 - the fallback below covers every failure
        pass
    kill_container()  # the killer could not run: no pid left for it, or no python3


class _Stream:
    """A pump thread splitting the engine's multiplexed stream into two
    pipes, plus the ``Watched`` side for ``watch``."""

    def __init__(self, sock: Any, kill: Callable[[], None]) -> None:
        self._sock = getattr(sock, "_sock", sock)
        self._kill = kill
        self.out_r, self._out_w = os.pipe()
        self.err_r, self._err_w = os.pipe()
        self._end_r, self._end_w = os.pipe()
        self.exit_fd: int | None = self._end_r
        self._ended = False
        self._killed = False
        self._thread = threading.Thread(target=self._pump, name="execbox-docker-exec", daemon=True)
        self._thread.start()

    def exited(self) -> bool:
        return True  # exit_fd is readable only once the stream has ended

    def kill(self) -> None:
        if self._ended or self._killed:
            return  # ended on its own: the wrapper has already cleaned up
        self._killed = True
        self._kill()

    def _pump(self) -> None:
        targets = {1: self._out_w, 2: self._err_w}
        buffer = b""
        try:
            while True:
                data = self._sock.recv(1 << 16)
                if not data:
                    break
                buffer += data
                while len(buffer) >= _HEADER.size:
                    kind, size = _HEADER.unpack_from(buffer)
                    if len(buffer) < _HEADER.size + size:
                        break
                    payload = buffer[_HEADER.size:_HEADER.size + size]
                    buffer = buffer[_HEADER.size + size:]
                    fd = targets.get(kind, self._err_w)
                    view = memoryview(payload)
                    while view:
                        view = view[os.write(fd, view):]
        except OSError:
            pass
        finally:
            self._ended = True
            for fd in (self._out_w, self._err_w, self._end_w):
                os.close(fd)

    def close(self) -> None:
        for step in (lambda: self._sock.shutdown(socket.SHUT_RDWR), self._sock.close):
            try:
                step()  # shutdown wakes a recv blocked in the pump
            except OSError:
                pass
        for fd in (self.out_r, self.err_r, self._end_r):
            os.close(fd)  # a pump blocked on a full pipe gets EPIPE
        self._thread.join(timeout=5)
