"""One block as a ``docker exec`` in a running container: output, deadline,
cancellation, and no process left behind inside the container.

The block runs under a small ``sh`` wrapper that carries a random token in
its environment. Before the block, when no other block runs, the wrapper
empties what an earlier block could leave outside the workspace (/tmp,
/dev/shm, /dev/mqueue, SysV IPC objects). When the block's command returns,
the wrapper counts the container's processes (a glob over /proc, no fork);
only when more than the container's own are left does it run the
in-container killer, which kills every process carrying the token, every
orphan (adopted by the container's init) that carries no other block's
token, and their descendants. On a timeout or a cancellation the same
killer runs in an exec of its own; if even that cannot start (a fork bomb
has used up the pids limit), the container itself is killed.

The engine multiplexes stdout and stderr on one socket, in order; it is
read on the calling thread, so the interleaving survives.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._output import Capture
from .._process import TOKEN_VAR, Cancellation, OutputCallback, ProcessOutcome, new_token
from .._watch import FdWaiter, Output, watch_loop

__all__ = ["IPC_SWEEP", "KILLER", "ContainerGone", "exec_output", "kill_leftovers", "memory_kills", "open_exec",
           "run_exec"]

# Before the block, when no other block runs (only init, the keep-alive and
# the wrapper are there; a killed process not yet reaped does not count), it
# empties what a block could leave outside the
# workspace: /tmp, /dev/shm and /dev/mqueue (hidden names too), and SysV
# shared memory, message queues and semaphores (IPC_SWEEP, started only when
# /proc/sysvipc lists some; gVisor has no /proc/sysvipc: ``ipcs -u`` counts
# them). Before, not after: a block that timed out or was cancelled is
# killed with its wrapper, and the next one must not find its leftovers.
# Then it runs "$@"; then, if anything besides init, the keep-alive and
# itself is left in the container, the killer (which spares the wrapper,
# its parent, so that the block's exit status survives; a fork it cannot
# make at once, after a fork bomb, is tried again). Shell built-ins only,
# unless something is there. python3 -I: the helpers must not import what
# a block planted.
WRAPPER = r"""
alone() {
    n=0
    for p in /proc/[0-9]*; do
        read -r stat 2>/dev/null <"$p/stat" || continue
        case ${stat##*) } in Z*|X*) ;; *) n=$((n + 1)) ;; esac
    done
    [ $n -le 3 ]
}
ipc_left() {
    if [ -r /proc/sysvipc/shm ]; then
        for f in /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem; do
            { read -r _ && read -r _; } <"$f" 2>/dev/null && return 0
        done
        return 1
    fi
    out=$(LC_ALL=C ipcs -u 2>/dev/null)
    for zero in "allocated queues = 0" "segments allocated 0" "used arrays = 0"; do
        case $out in *"$zero"*) ;; *) return 0 ;; esac
    done
    return 1
}
if alone; then
    for d in /tmp /dev/shm /dev/mqueue; do
        for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
            if [ -e "$f" ] || [ -L "$f" ]; then
                rm -rf "$d"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
                break
            fi
        done
    done
    ipc_left && python3 -I -S -c "$EXECBOX_IPC_SWEEP" 2>/dev/null
fi
"$@"
rc=$?
if ! alone; then
    for try in 1 2 3 4 5; do
        python3 -I -c "$EXECBOX_KILLER" "$EXECBOX_RUN_TOKEN" $EXECBOX_LIVE_TOKENS 2>/dev/null && break
        sleep 0.2 2>/dev/null
    done
fi
exit $rc
"""

# Removes the SysV IPC objects the block user may remove (IPC_RMID; what
# another user made stays). Linux lists them in /proc/sysvipc. gVisor has
# no such files, and its SHM_INFO and MSG_INFO give no highest index (so
# ``ipcrm --all`` misses them there): it numbers objects up from the last
# one made, so a new private one tells where to look, and ids below it are
# tried (IPC_STAT: its IPC_RMID of a missing id succeeds) until as many are
# found as SHM_INFO, MSG_INFO and SEM_INFO count, or a bound is reached.
IPC_SWEEP = r"""
import ctypes, sys
libc = ctypes.CDLL(None)
buf = ctypes.create_string_buffer(512)
IPC_PRIVATE, IPC_RMID, IPC_STAT, SHM_INFO, MSG_INFO, SEM_INFO = 0, 0, 2, 14, 12, 19
kinds = {  # kind: (make one, control one, its INFO command, where the count in use lies in what it fills)
    "shm": (lambda: libc.shmget(IPC_PRIVATE, 1, 0o600), lambda i, cmd: libc.shmctl(i, cmd, buf), SHM_INFO, 0),
    "msg": (lambda: libc.msgget(IPC_PRIVATE, 0o600), lambda i, cmd: libc.msgctl(i, cmd, buf), MSG_INFO, 0),
    "sem": (lambda: libc.semget(IPC_PRIVATE, 1, 0o600), lambda i, cmd: libc.semctl(i, 0, cmd, buf), SEM_INFO, 28),
}
for kind, (make, control, info, at) in kinds.items():
    try:
        with open("/proc/sysvipc/" + kind) as f:
            listed = f.read().splitlines()[1:]
    except OSError:
        left = int.from_bytes(buf.raw[at:at + 4], sys.byteorder) if control(0, info) >= 0 else 0
        if left <= 0:
            continue
        top = make()
        if top >= 0:
            control(top, IPC_RMID)
        else:
            top = 1 << 14
        for i in range(top - 1, max(top - (1 << 14), 0) - 1, -1):
            if control(i, IPC_STAT) == 0:
                control(i, IPC_RMID)
                left -= 1
                if left <= 0:
                    break
        continue
    for line in listed:
        control(int(line.split()[1]), IPC_RMID)
"""

# argv: the block's token, then the tokens of the executor's other running
# blocks. Kills what carries the block's token, orphans that carry no live
# token (a forged one does not protect), and their descendants; spares
# init, the keep-alive (init's oldest child), itself and its parent; kills
# until nothing more is found.
KILLER = r"""
import os, signal, sys
mark = b"EXECBOX_RUN_TOKEN=" + sys.argv[1].encode()
live = {b"EXECBOX_RUN_TOKEN=" + t.encode() for t in sys.argv[2:]}
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
        elif parent[pid] == 1 and (env is None or not live.intersection(env)):
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
KILL_TIMEOUT_S = 5.0


class ContainerGone(Exception):
    """The container stopped (or vanished) under a block."""


def run_exec(client: Any, container_id: str, argv: Sequence[str], *, env: dict[str, str], workdir: str,
             timeout_s: float, output_limit: int, cancel: Cancellation | None,
             on_output: OutputCallback | None, kill_container: Callable[[], None], live_tokens: set[str]
             ) -> ProcessOutcome:
    """Run ``argv`` in the container; exit codes as ``run_process`` gives
    them (124 on timeout). ``live_tokens``: the tokens of the executor's
    running blocks (this one's is added while it runs). Raises
    ContainerGone if the container is not running."""
    token = new_token()
    started = time.monotonic()
    others = sorted(live_tokens)
    live_tokens.add(token)
    try:
        return _run(client, container_id, argv, env, workdir, timeout_s, output_limit, cancel, on_output,
                    kill_container, token, others, started)
    finally:
        live_tokens.discard(token)


def _run(client: Any, container_id: str, argv: Sequence[str], env: dict[str, str], workdir: str,
         timeout_s: float, output_limit: int, cancel: Cancellation | None, on_output: OutputCallback | None,
         kill_container: Callable[[], None], token: str, others: list[str], started: float) -> ProcessOutcome:
    import docker  # type: ignore[import-untyped]

    environment = {**env, TOKEN_VAR: token, "EXECBOX_KILLER": KILLER, "EXECBOX_IPC_SWEEP": IPC_SWEEP,
                   "EXECBOX_LIVE_TOKENS": " ".join(others)}
    try:
        exec_id, raw = open_exec(client, container_id, ["/bin/sh", "-c", WRAPPER, "execbox", *argv],
                                 environment=environment, workdir=workdir)
    except docker.errors.NotFound as exc:
        raise ContainerGone(str(exc.explanation or exc)) from None
    except docker.errors.APIError as exc:
        text = str(exc.explanation or exc)
        if exc.status_code == 409 or "is not running" in text or "No such container" in text:
            raise ContainerGone(text) from None
        raise
    try:
        capture, timed_out, cancelled = _read_frames(
            raw, deadline=started + timeout_s, output_limit=output_limit, cancel=cancel, on_output=on_output,
            kill=lambda: _kill_block(client, container_id, [token, *others], kill_container))
    finally:
        raw.close()
    try:
        code = client.api.exec_inspect(exec_id).get("ExitCode")
    except docker.errors.APIError:
        code = None
    if code is None:
        code = 137  # the container went away under it
    if timed_out:
        code = 124
    return ProcessOutcome(exit_code=code, capture=capture, timed_out=timed_out, cancelled=cancelled,
                          duration_s=time.monotonic() - started)


def open_exec(client: Any, container_id: str, argv: Sequence[str], **options: Any) -> tuple[str, socket.socket]:
    """Create and start an exec; its id and the socket of its output.

    Its stdin is the attached stream, closed at once (the process reads
    end of file), never the engine's default: the host's /dev/null, which
    runsc gives to the container's user (the host's /dev/null became
    65534's after every exec under gVisor)."""
    exec_id = client.api.exec_create(container_id, list(argv), stdin=True, **options)["Id"]
    sock = client.api.exec_start(exec_id, socket=True)
    raw = getattr(sock, "_sock", sock)
    try:
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        raw.close()
        raise
    return exec_id, raw


def exec_output(client: Any, container_id: str, argv: Sequence[str], timeout_s: float = 30.0) -> str:
    """What a short command prints on stdout (``open_exec``'s stdin)."""
    _, raw = open_exec(client, container_id, argv)
    raw.settimeout(timeout_s)
    data = b""
    try:
        while chunk := raw.recv(1 << 16):
            data += chunk
    finally:
        raw.close()
    frames, _ = _split_frames(data)
    return b"".join(payload for kind, payload in frames if kind == 1).decode(errors="replace")


def _split_frames(buffer: bytes) -> tuple[list[tuple[int, bytes]], bytes]:
    """The engine's whole frames in ``buffer`` (stream 1 stdout, 2 stderr;
    8-byte header: stream, size), and what is left of a frame still coming."""
    frames = []
    while len(buffer) >= _HEADER.size:
        kind, size = _HEADER.unpack_from(buffer)
        if len(buffer) < _HEADER.size + size:
            break
        frames.append((kind, buffer[_HEADER.size:_HEADER.size + size]))
        buffer = buffer[_HEADER.size + size:]
    return frames, buffer


def memory_kills(client: Any, container_id: str) -> int | None:
    """How many times the kernel's OOM killer has struck in the container
    (cgroup v1 or v2), or None when it cannot be read."""
    try:
        text = exec_output(client, container_id, ["/bin/sh", "-c",
                                                  "cat /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null || "
                                                  "cat /sys/fs/cgroup/memory.events 2>/dev/null"])
    except Exception:  # noqa: BLE001 - a best-effort reading
        return None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill" and value.strip().isdigit():
            return int(value)
    return None


def kill_leftovers(client: Any, container_id: str, kill_container: Callable[[], None]) -> None:
    """Kill every orphan in the container (none of the executor's blocks
    runs): what a finished block's fork bomb left behind."""
    _kill_block(client, container_id, [new_token()], kill_container)


def _kill_block(client: Any, container_id: str, tokens: list[str], kill_container: Callable[[], None]) -> None:
    """The in-container killer (``tokens``: the block's, then the live
    ones), given KILL_TIMEOUT_S; when it cannot start (no pid left, no
    python3), fails or hangs, the container is killed."""
    try:
        exec_id, raw = open_exec(client, container_id, ["python3", "-I", "-c", KILLER, *tokens], workdir="/")
        raw.settimeout(KILL_TIMEOUT_S)
        try:
            while raw.recv(1 << 16):
                pass
        finally:
            raw.close()
        if client.api.exec_inspect(exec_id).get("ExitCode") == 0:
            return
    except Exception:  # noqa: BLE001 - the fallback below covers every failure
        pass
    kill_container()


def _read_frames(sock: socket.socket, *, deadline: float, output_limit: int, cancel: Cancellation | None,
                 on_output: OutputCallback | None, kill: Callable[[], None]) -> tuple[Capture, bool, bool]:
    """Read the engine's multiplexed stream in arrival order until it ends
    (``_watch.watch_loop``); on the deadline or a cancellation, run ``kill``
    once and read what is left for up to DRAIN_GRACE_S. No kill when the
    block ends: the wrapper has killed what it left."""
    output = Output(output_limit, on_output)
    with FdWaiter() as waiter:
        frames = _Frames(sock, waiter, output, kill)
        timed_out, cancelled = watch_loop(frames, deadline=deadline, cancel=cancel)
    return output.capture, timed_out, cancelled


class _Frames:
    """An exec's output socket as a ``_watch.Source``: it ends (and the
    block with it) when the engine closes the stream."""

    def __init__(self, sock: socket.socket, waiter: FdWaiter, output: Output, kill: Callable[[], None]) -> None:
        self.sock, self.output, self.kill = sock, output, kill
        self.closed = self.ended = False
        self._buffer = b""
        self._waiter = waiter
        waiter.add(sock.fileno(), self._read)

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        self._waiter.wait(timeout, cancel)

    def _read(self, fd: int) -> None:
        data = self.sock.recv(1 << 16)
        if not data:
            self._waiter.remove(fd)
            self.closed = self.ended = True
            return
        frames, self._buffer = _split_frames(self._buffer + data)
        for kind, payload in frames:
            self.output.feed("stdout" if kind == 1 else "stderr", payload)
