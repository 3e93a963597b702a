"""The sandbox's warm pool, host side: one long-lived jail per executor
holding a zygote interpreter (see ``_zygote/zygote.py``), the units it makes ahead
of demand, and the run of one block in one of them.

The host asks the zygote for units over a SOCK_SEQPACKET pair (``unit``,
with the cgroup.procs files of the cgroups made for that unit) and gets each
unit's socket back; ``pool_size`` units are kept asked for or ready. A block
goes straight to a ready unit's code process: a JSON request with its status
socket and the write ends of its stdout and stderr pipes; the unit's init
gets the status socket too. The unit writes ``exit N`` on the status socket;
the host writes ``kill`` (or closes it) to end the block and its whole PID
namespace.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..._errors import BackendUnavailableError, ConfigurationError, StallError
from .._process import Cancellation, OutputCallback, ProcessOutcome, stdin_file, watch
from ._cgroups import BlockCgroup
from ._identity import Lease, give_pipe
from ._jail import spawn_kept
from ._launcher import Launch
from ._sockets import receive_within, recv_fds_now, send_fds_now, send_within
from ._unit import KILLED, Unit, exit_status

__all__ = ["KILLED", "ZYGOTE_SOURCE", "ZygotePool", "exit_status"]

# The zygote's folder (its program and what it reads), bound read-only at
# ZYGOTE_INSIDE in the jail.
ZYGOTE_SOURCE = Path(__file__).with_name("_zygote")
ZYGOTE_INSIDE = "/.execbox-zygote"
START_TIMEOUT_S = 120.0
# The longest waits on the zygote: a unit is made in a few ms (a fork and
# namespaces), a request taken at once; past these it is taken for stuck.
UNIT_WAIT_S = 15.0
SEND_WAIT_S = 5.0
MAX_SIZE = 64  # units kept ahead: each is two waiting processes
UNSTARTED_TRIES = 3  # a block whose unit died before it started goes to a fresh one, this often at most


class ZygotePool:
    """A zygote in a jail and the units it made ahead of demand.

    ``launcher`` makes the zygote's jail launch from its command
    (``_launcher.prepare`` with the zygote's policy: its folder bound at
    ZYGOTE_INSIDE); ``config`` what every block shares; ``make_cgroup`` makes
    the cgroup of one future block (None: no cgroups here).

    Bounded: units asked for, ready and running together are kept at
    ``size`` by the refill thread (a caller finding none asks for its own,
    so a burst of callers adds at most one unit each, never a backlog the
    zygote works through after the burst). No wait on the zygote is without
    a deadline: a zygote that does not take a request within SEND_WAIT_S,
    or hand over a unit within UNIT_WAIT_S, is taken for stuck, stopped and
    started afresh; twice in a row raises ``StallError``."""

    def __init__(
        self,
        launcher: Callable[[Sequence[str]], Launch],
        python: str,
        cwd: str,
        config: Mapping[str, Any],
        *,
        size: int,
        make_cgroup: Callable[[], BlockCgroup | None],
        owner: Lease | None = None,
    ) -> None:
        self.launcher = launcher
        self.python = python
        self.cwd = cwd
        self.config = dict(config)
        self.size = size
        self.make_cgroup = make_cgroup
        self.owner = owner  # the jail id, which must own the blocks' output pipes
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)  # the refill thread waits on it for a shortfall
        self._control: socket.socket | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None
        self._asked: deque[BlockCgroup | None] = deque()  # cgroups of units asked for, in order
        self._ready: deque[tuple[socket.socket, socket.socket, BlockCgroup | None]] = deque()
        self._running = 0  # units taken whose block has not ended: they count towards size
        self._making = 0  # cgroups the refill thread is making, for units it will ask for
        self._closed = False
        self._started = False
        self._refiller: threading.Thread | None = None
        self._counts = {"units_made": 0, "refills_failed": 0, "zygote_restarts": 0, "stalls": 0}

    def health(self) -> dict[str, Any]:
        """What the pool holds and what went wrong so far (doctor, ``/v1/info``)."""
        with self._lock:
            return {
                "size": self.size,
                "alive": self._control is not None,
                "units_ready": len(self._ready),
                "units_asked": len(self._asked),
                "blocks_running": self._running,
                **self._counts,
            }

    def start(self) -> None:
        with self._lock:
            self._start_locked()

    def _start_locked(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 (bwrap's log for the pool's life; closed in _stop_locked)
        # bwrap's options from a memfd, the config on the socket: nothing of the host's layout in an argv
        try:
            launch = self.launcher(
                [
                    self.python,
                    "-I",
                    *self._startup_flags(),
                    ZYGOTE_INSIDE + "/zygote.py",
                    str(theirs.fileno()),
                ]
            )
        except BaseException:
            theirs.close()
            raise
        try:
            self._proc = spawn_kept(
                launch.argv,
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=self._log,
                pass_fds=[theirs.fileno(), *launch.pass_fds],
                cwd=self.cwd,
                start_new_session=True,
                preexec_fn=launch.preexec,
            )
        finally:
            theirs.close()
            launch.close()
        self._control = ours
        why = ""
        try:
            send_within(
                ours,
                json.dumps(self.config).encode(),
                [],
                time.monotonic() + SEND_WAIT_S,
                "the sandbox pool's zygote to take its settings",
            )
            hello = receive_within(
                ours, time.monotonic() + START_TIMEOUT_S, 1 << 16, 0, "the sandbox pool's zygote to start"
            )[0]
        except OSError as exc:
            hello, why = b"", f"{exc}: "
            if exc.errno == errno.EMSGSIZE:  # one socket message: the environment is most of it
                why = (
                    f"its settings ({exc}) are too large for one message: "
                    "pass a smaller env= to the executor; "
                )
        if hello != b"ready":
            tail = self._tail()
            self._stop_locked(stuck=True)
            if hello.startswith(b"error "):
                raise ConfigurationError(
                    f"sandbox pool: {hello[6:].decode(errors='replace')} (check SandboxExecutor(preload=...))"
                )
            raise BackendUnavailableError("sandbox", f"the sandbox pool did not start: {why}{tail}")
        if self._started:
            self._counts["zygote_restarts"] += 1
        self._started = True
        for _ in range(self._shortfall()):
            self._ask(self.make_cgroup())
        if self._refiller is None:
            self._refiller = threading.Thread(target=self._refill, name="execbox-sandbox-refill", daemon=True)
            self._refiller.start()

    def _startup_flags(self) -> list[str]:
        """What the blocks' PYTHONUNBUFFERED would have set at an
        interpreter's start, as the flag that ``-I`` still takes (the
        zygote's stdio become each block's)."""
        return ["-u"] if self.config.get("env", {}).get("PYTHONUNBUFFERED") else []

    def stop(self) -> None:
        with self._lock:
            self._closed = True
            self._stop_locked()
            self._wake.notify_all()  # the refill thread leaves
        if self._refiller is not None:
            self._refiller.join()
            self._refiller = None

    def _shortfall(self) -> int:
        return self.size - len(self._asked) - len(self._ready) - self._running - self._making

    def _refill(self) -> None:
        """Keep the pool at its size, off the blocks' path: a unit is asked
        for when one is taken and its block has ended (making one, a fork and
        namespaces, would compete with that block for the CPU)."""
        while True:
            with self._lock:
                while not self._closed and (self._control is None or self._shortfall() <= 0):
                    self._wake.wait()
                if self._closed:
                    return
                self._making += 1
            group: BlockCgroup | None = None
            made = False
            try:
                group = self.make_cgroup()  # the slow part, outside the lock
                made = True
            except Exception:  # noqa: BLE001 (a cgroup the host refused now: a block's own take() says why)
                pass
            with self._lock:
                self._making -= 1
                if not made:
                    self._counts["refills_failed"] += 1
                    self._wake.wait(1.0)  # not again at once
                    continue
                if self._control is None or self._closed:
                    if group is not None:
                        group.remove()
                    continue
                try:
                    self._ask(group)
                except OSError:  # the zygote is gone or stuck: stopped here, the next take() starts one
                    if group is not None:
                        group.remove()
                    self._counts["refills_failed"] += 1
                    self._stop_locked(stuck=True)

    def _stop_locked(self, stuck: bool = False) -> None:
        """Stop the zygote (``stuck``: at once, it reads nothing more) and
        let go of every unit not taken."""
        if stuck and self._proc is not None:
            self._proc.kill()  # bwrap: the jail's processes die with it (--die-with-parent)
        if self._control is not None:
            self._control.close()  # the zygote sees EOF and leaves; its jail dies with it
            self._control = None
        for unit, code, group in self._ready:
            unit.close()  # the unit's init sees EOF and leaves
            code.close()
            if group is not None:
                group.remove()
        self._ready.clear()
        for group in self._asked:
            if group is not None:
                group.remove()
        self._asked.clear()
        if self._proc is not None:
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def _tail(self) -> str:
        if self._log is None:
            return "(no log)"
        self._log.seek(0)
        text = self._log.read()[-2000:].decode(errors="replace").strip()
        return text or f"exit code {self._proc.poll() if self._proc else '?'}"

    def _ask(self, group: BlockCgroup | None) -> None:
        """Ask the zygote for one more unit (it answers with its socket)."""
        assert self._control is not None
        fds = group.open_procs() if group is not None else []
        try:
            send_within(
                self._control,
                b"unit",
                fds,
                time.monotonic() + SEND_WAIT_S,
                "the sandbox pool's zygote to take a request",
            )
        finally:
            for fd in fds:
                os.close(fd)
        self._asked.append(group)

    def _receive_unit(self) -> None:
        """Take every unit the zygote has handed over; wait (UNIT_WAIT_S at
        most) for one when none is ready."""
        assert self._control is not None
        deadline = time.monotonic() + UNIT_WAIT_S
        while self._asked:
            if self._ready:
                try:
                    data, fds = recv_fds_now(self._control, 64, 2)
                except BlockingIOError:
                    return  # none more now, and one is ready
            else:
                data, fds = receive_within(
                    self._control, deadline, 64, 2, "a unit from the sandbox pool's zygote"
                )
            if not data or len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                raise OSError("the sandbox pool's zygote is gone")
            unit, code = (socket.socket(fileno=fd) for fd in fds)
            self._ready.append((unit, code, self._asked.popleft()))
            self._counts["units_made"] += 1

    def _take(self) -> tuple[socket.socket, socket.socket, BlockCgroup | None]:
        """A ready unit (the zygote restarted once if it died or got stuck)."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._closed:
                        raise BackendUnavailableError("sandbox", "the sandbox pool is closed")
                    if self._proc is not None and self._proc.poll() is not None:
                        # every unit it made died with it, ready or still in its socket (more, under
                        # load, than a block's tries): start afresh rather than hand one out
                        raise OSError("the sandbox pool's zygote is gone")
                    if self._control is None:
                        self._start_locked()
                        self._wake.notify_all()
                    if not self._ready and not self._asked:  # more callers than units: one of its own
                        self._ask(self.make_cgroup())
                    self._receive_unit()
                    return self._ready.popleft()
                except (OSError, IndexError) as exc:
                    tail = self._tail()
                    if isinstance(exc, StallError):
                        self._counts["stalls"] += 1
                    self._stop_locked(stuck=isinstance(exc, StallError))
                    if attempt == 2:
                        if isinstance(exc, StallError):
                            raise StallError(
                                f"{exc}, twice in a row (the zygote was started afresh in between): {tail}",
                                waiting_for=exc.waiting_for,
                            ) from exc
                        raise BackendUnavailableError(
                            "sandbox", f"the sandbox pool died and could not be restarted: {exc}: {tail}"
                        ) from exc
            raise AssertionError("unreachable")

    def claim(self) -> tuple[socket.socket, socket.socket, BlockCgroup | None]:
        """A ready unit the caller keeps (a stateful session, ``_session``);
        its replacement is asked for behind it."""
        taken = self._take()
        with self._lock:
            self._wake.notify()
        return taken

    def run(
        self,
        request: Mapping[str, Any],
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: bytes | None = None,
    ) -> tuple[ProcessOutcome, BlockCgroup | None]:
        """Run one block in a ready unit: its outcome (as ``run_process``
        gives it) and its cgroup, which the caller removes. ``stdin``: the
        block's standard input (a sealed memfd sent with the request;
        default /dev/null)."""
        started = time.monotonic()
        data = json.dumps(request).encode()
        given = stdin_file(stdin) if stdin is not None else None
        with self._lock:
            self._running += 1  # from now on, this block's unit counts towards the pool's size
        try:
            return self._run(
                data,
                started,
                timeout_s=timeout_s,
                output_limit=output_limit,
                cancel=cancel,
                on_output=on_output,
                stdin=given,
            )
        finally:
            if given is not None:
                os.close(given)
            with self._lock:
                self._running -= 1
                # Only now: making the replacement (a fork, namespaces) would
                # compete with this block for the CPU.
                self._wake.notify()

    def _run(
        self,
        data: bytes,
        started: float,
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: int | None,
    ) -> tuple[ProcessOutcome, BlockCgroup | None]:
        for attempt in range(1, UNSTARTED_TRIES + 1):
            outcome, group, ran = self._run_once(
                data,
                started,
                timeout_s=timeout_s,
                output_limit=output_limit,
                cancel=cancel,
                on_output=on_output,
                stdin=stdin,
            )
            if ran or attempt == UNSTARTED_TRIES:
                return outcome, group
            # the unit died before the block's first line (its zygote or jail went): in a fresh one
            if group is not None:
                group.remove()
        raise AssertionError("unreachable")

    def _run_once(
        self,
        data: bytes,
        started: float,
        *,
        timeout_s: float,
        output_limit: int,
        cancel: Cancellation | None,
        on_output: OutputCallback | None,
        stdin: int | None,
    ) -> tuple[ProcessOutcome, BlockCgroup | None, bool]:
        """One try: (outcome, cgroup, whether the block started)."""
        while True:
            unit, code, group = self._take()
            status, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            out_r, out_w = os.pipe()
            err_r, err_w = os.pipe()
            for fd in (out_w, err_w):
                give_pipe(fd, self.owner)
            try:
                # A unit reads its one message at once: a full socket is a unit gone wrong
                send_fds_now(
                    code, data, [theirs.fileno(), out_w, err_w, *([stdin] if stdin is not None else [])]
                )
                send_fds_now(unit, b"go", [theirs.fileno()])
                break
            except OSError:  # that unit died while waiting: take another
                for fd in (out_r, err_r):
                    os.close(fd)
                status.close()
                if group is not None:
                    group.remove()
            finally:
                unit.close()
                code.close()
                theirs.close()
                os.close(out_w)
                os.close(err_w)
        try:
            watched = Unit(status, group)
            # the block's time starts now: a wait for a unit (callers beyond the pool) is not its own
            capture, timed_out, cancelled = watch(
                out_r,
                err_r,
                watched,
                deadline=time.monotonic() + timeout_s,
                output_limit=output_limit,
                cancel=cancel,
                on_output=on_output,
            )
        finally:
            status.close()
            os.close(out_r)
            os.close(err_r)
        exit_code = 124 if timed_out else (watched.code if watched.code is not None else KILLED)
        ran = watched.started or timed_out or cancelled
        return (
            ProcessOutcome(
                exit_code=exit_code,
                capture=capture,
                timed_out=timed_out,
                cancelled=cancelled,
                duration_s=time.monotonic() - started,
            ),
            group,
            ran,
        )

    # what callers before the bounded pool named take()
    take = _take
