"""The host's end of the agent in a container (``_agent/agent.py``): the
container's attached stream, a reader thread that sorts the agent's frames
by block id (blocks of one executor may run at the same time), and each
block's frames as a ``_watch.Source`` (``AgentBlock``; ``_agent_run`` runs one).

Measured (runc, this 2-core machine): ``print(1)`` costs ~65 ms as a
``docker exec`` and a few ms through the agent; the attached stream works
under gVisor too, where a unix socket in a bind mount needs ``--host-uds``.

A block that times out or is cancelled is killed by the agent (KILL); if
the agent does not report its end within ``_watch.DRAIN_GRACE_S``, the
container is killed. The agent kills it too at its own deadline,
DEADLINE_GRACE_S after the timeout, whatever the host did.

No block can write to the stream (``_agent/blockuser.py``: blocks run under
another uid than the holders of the container's stdio). Each frame read is
checked all the same (``wire``: its kind, its size, an EXIT's report), and
a block's queue is bounded by the agent's window: a frame the agent never
sends makes the stream untrustworthy (``AgentLink.malformed``). The running
blocks then end as failures that name it, never as an exception of
``run()`` and never as a report taken from that stream; their container is
killed, and the next block gets a new one. If the agent's stream ends (the
agent died: the OOM killer took it; the container stops with it), the
running blocks end with exit 137 and ``agent_died``, and the link is dead:
the executor starts a new container for the next block.

Nothing between the two waits without a deadline. A send that the agent
does not take within ANSWER_S fails; a block's thread asks the agent
(PING) when it has been silent for PING_S, and an agent that answers
neither that nor a RUN within ANSWER_S is stalled (stopped from outside,
or wedged: no block can signal it): its container is killed, and a block whose RUN it never
answered (STARTED comes before the fork) raises ``AgentStalled``, to run in
a new container. A block's frames wait for its thread in a queue bounded by
the agent's window (``wire.WINDOW``): the thread acknowledges what it has
consumed, and works through the queue in slices (its deadline is checked
between them, whatever ``on_output`` costs).
"""

from __future__ import annotations

import collections
import itertools
import json
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from .._process import Cancellation, ProcessOutcome
from .._watch import FdWaiter, Output
from ._agent import wire
from ._exec import ContainerGone, split_frames

__all__ = [
    "AGENT_START_TIMEOUT_S",
    "ANSWER_S",
    "DEADLINE_GRACE_S",
    "PING_S",
    "AgentBlock",
    "AgentLink",
    "AgentOutcome",
    "AgentStalled",
    "NoAgent",
]

# How long a new container's agent may take to answer (gVisor: ~1 s)
AGENT_START_TIMEOUT_S = 30.0
# An agent silent this long after it was asked something (a RUN, a PING) is
# stalled; a send it does not take in this time fails
ANSWER_S = 10.0
# A block's thread pings an agent silent this long
PING_S = 5.0
# The agent kills a block this long after its timeout, whatever the host did
DEADLINE_GRACE_S = 1.0
# A block's output received and not yet consumed, at most: the agent's window, and the pipe read of each
# of the block's two pipes that may cross it (the agent stops reading once past it)
_QUEUE_MAX = wire.WINDOW + 2 * wire.MAX_PAYLOAD
# How long a block's thread works through its queued frames before it looks at its deadline again
_DRAIN_SLICE_S = 0.05
NO_AGENT = b"execbox-no-agent"
_STDERR_KEPT = 4096
_LOG_READ_MAX = 64 * 1024  # of the engine's log of an agent that left before the attach


class NoAgent(Exception):
    """The image has no python3: blocks run as ``docker exec``."""


class AgentStalled(ContainerGone):
    """The agent did not answer within ANSWER_S; its container was killed
    and the block had not started: it may run in a new container."""


@dataclass(kw_only=True)
class AgentOutcome(ProcessOutcome):
    """A block run by the agent: with the container's OOM kill count after
    a SIGKILL (None: unknown), whether the agent died under it, and why its
    stream could not be trusted (None: it could)."""

    oom_kills: int | None = None
    agent_died: bool = False
    agent_stalled: bool = False
    malformed: str | None = None


class AgentLink:
    """The attached stream of one container whose command is the agent."""

    def __init__(self, client: Any, container_id: str) -> None:
        sock = client.api.attach_socket(
            container_id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
        )
        self._client, self._container_id = client, container_id
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._io = sock  # (a SocketIO over it holds the descriptor open until it is closed too)
        self._send_lock = threading.Lock()
        self._blocks: dict[int, AgentBlock] = {}
        self._ids = itertools.count(1)
        self._frames = wire.Frames()
        self._pending = b""
        self._stderr = b""
        self.dead: str | None = None
        self.malformed: str | None = None  # why the stream cannot be trusted: a frame the agent never sends
        self.info: dict[str, Any] = {}
        self.heard = time.monotonic()  # when the agent last sent anything
        self.was_stalled = False  # a block found it stalled (its container was killed for that)
        self._asked: float | None = None  # when it was asked something, since it was last heard

    def handshake(self, timeout_s: float = AGENT_START_TIMEOUT_S) -> dict[str, Any]:
        """HELLO, and the agent's READY (its pid, programs, Python). Raises
        NoAgent when the image has no python3, ContainerGone when the
        container stopped before answering; then starts the reader."""
        self._sock.settimeout(timeout_s)
        try:
            self._sock.sendall(wire.pack(wire.HELLO, 0, b"\n"))  # the newline ends the no-agent shell's read
            seen = b""
            while True:
                data = self._sock.recv(1 << 16)
                if not data:
                    said = self.stderr_text() or self._logged_stderr() or "no word"
                    raise ContainerGone(f"the agent stopped before it answered ({said})")
                for kind, payload in self._docker_frames(data):
                    if kind != 1:
                        self._keep_stderr(payload)
                        continue
                    seen += payload
                    if seen.startswith(NO_AGENT[: len(seen)]) and NO_AGENT.startswith(seen[: len(NO_AGENT)]):
                        if len(seen) >= len(NO_AGENT):
                            raise NoAgent()
                        continue
                    for frame_kind, _, body in self._frames.feed(payload):
                        if frame_kind == wire.READY:
                            self.info = _ready(body)
                            self.heard = time.monotonic()
                            self._sock.settimeout(ANSWER_S)  # sends; the reader reads on past it
                            threading.Thread(
                                target=self._read, name="execbox-agent-link", daemon=True
                            ).start()
                            return self.info
        except (OSError, ValueError) as exc:
            said = self.stderr_text() or self._logged_stderr()
            self.close()
            raise ContainerGone(f"the agent did not answer: {exc}" + (f" ({said})" if said else "")) from None
        except BaseException:
            self.close()
            raise

    def _docker_frames(self, data: bytes) -> list[tuple[int, bytes]]:
        frames, self._pending = split_frames(self._pending + data)
        return frames

    def _keep_stderr(self, payload: bytes) -> None:
        self._stderr = (self._stderr + payload)[-_STDERR_KEPT:]

    def stderr_text(self) -> str:
        return self._stderr.decode(errors="replace").strip()

    def _logged_stderr(self) -> str:
        """What the agent wrote to stderr before the stream was attached (it
        may refuse, and leave, before that under load): the last of the
        engine's log of it: its last ``_STDERR_KEPT`` bytes, of no more than
        ``_LOG_READ_MAX`` read."""
        kept, read = b"", 0
        try:
            for chunk in self._client.api.logs(
                self._container_id, stdout=False, stderr=True, stream=True, tail=20
            ):
                read += len(chunk)
                kept = (kept + chunk)[-_STDERR_KEPT:]
                if read >= _LOG_READ_MAX:
                    break
        except Exception:  # noqa: BLE001 - the engine's errors: only the agent's word is lost
            return ""
        return kept.decode(errors="replace").strip()

    def _read(self) -> None:
        reason = "the agent's stream ended"
        try:
            while not self.dead:
                try:
                    data = self._sock.recv(1 << 16)
                except TimeoutError:
                    continue  # silence: the blocks' threads judge it (stalled)
                if not data:
                    break
                self.heard = time.monotonic()
                for kind, payload in self._docker_frames(data):
                    if kind != 1:
                        self._keep_stderr(payload)
                        continue
                    for frame_kind, block_id, body in self._frames.feed(payload):
                        wire.check_from_agent(frame_kind, len(body))
                        block = self._blocks.get(block_id)  # (none: one that has ended here, or no block)
                        if block is not None:
                            block.take(frame_kind, body)
        except ValueError as exc:
            reason = self.malformed = f"execbox's agent sent a malformed frame ({exc})"
        except OSError as exc:
            reason = f"the agent's stream failed: {exc}"
        if self.stderr_text():
            reason += f" (the agent said: {self.stderr_text()[-500:]})"
        self.dead = self.dead or reason
        for block in list(self._blocks.values()):
            block.push(None, b"")
        self.close()

    def send(self, kind: int, block_id: int, payload: bytes = b"", *, question: bool = False) -> None:
        """A frame to the agent; ``question``: one it answers (RUN, PING)."""
        if self.dead:
            raise ContainerGone(self.dead)
        try:
            with self._send_lock:
                if question and (self._asked is None or self._asked < self.heard):
                    self._asked = time.monotonic()
                self._sock.sendall(wire.pack(kind, block_id, payload))
        except TimeoutError:
            self.was_stalled = True
            self.dead = f"the agent took nothing sent to it for {ANSWER_S:.0f} s"
            raise AgentStalled(self.dead) from None
        except OSError as exc:
            raise ContainerGone(f"the agent's stream failed: {exc}") from None

    def stalled(self, now: float) -> bool:
        """Asked something, and silent since for ANSWER_S."""
        asked = self._asked
        if asked is not None and asked > self.heard and now - asked > ANSWER_S:
            self.was_stalled = True
        return self.was_stalled

    def check_in(self, now: float) -> float:
        """Ping an agent silent for PING_S (unless it has a question to
        answer already); the time of the next look."""
        asked = self._asked
        if asked is not None and asked > self.heard:
            return asked + ANSWER_S
        if now - self.heard >= PING_S:
            try:
                self.send(wire.PING, 0, question=True)
            except ContainerGone:
                return now + 0.05  # its end comes as the stream's, soon
            return now + ANSWER_S
        return self.heard + PING_S

    def open_block(self, waiter: FdWaiter, output: Output) -> AgentBlock:
        if self.dead:
            raise ContainerGone(self.dead)
        block = AgentBlock(self, next(self._ids), waiter, output)
        self._blocks[block.id] = block
        if self.dead:  # died meanwhile: the reader may have missed this block
            block.push(None, b"")
        return block

    def forget(self, block: AgentBlock) -> None:
        self._blocks.pop(block.id, None)

    def close(self) -> None:
        """Idempotent; the reader ends (its recv fails)."""
        self.dead = self.dead or "closed"
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._io is not self._sock:
            self._io.close()
        self._sock.close()


class AgentBlock:
    """One block's frames, as a ``_watch.Source``: the reader thread pushes,
    the block's thread feeds its output, acknowledges it, and sees its end
    (``gone``: the stream's; ``stalled``: the agent stopped answering)."""

    def __init__(self, link: AgentLink, block_id: int, waiter: FdWaiter, output: Output) -> None:
        self.link, self.id, self.output = link, block_id, output
        self.closed = self.ended = self.gone = self.stalled = False
        self.answered = False  # the agent took its RUN (any frame of the block came)
        self.report: dict[str, Any] = {}
        self._consumed = 0  # output bytes not yet acknowledged
        # output bytes received (by the reader) and consumed (by the block's thread): each has one writer, and
        # the agent sends more only once what was consumed is acknowledged: received - consumed stays within
        # _QUEUE_MAX, and past it the queue (the host's memory) is cut short
        self._received = self._consumed_all = 0
        # (kind, payload): an EXIT's checked report, output's bytes; (None, b""): the stream's end
        self._events: collections.deque[tuple[int | None, Any]] = collections.deque()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)
        self._waiter = waiter
        waiter.add(self._wake_r, self._drain)

    def take(self, kind: int, payload: bytes) -> None:
        """A frame of this block from the reader; raises ValueError on one
        the agent never sends (an EXIT that is not one, output past the window)."""
        if kind == wire.EXIT:
            self.push(kind, wire.read_exit(payload))
            return
        if kind in (wire.STDOUT, wire.STDERR):
            self._received += len(payload)
            if self._received - self._consumed_all > _QUEUE_MAX:
                raise ValueError(f"block {self.id}'s output past the agent's window ({wire.WINDOW} bytes)")
        self.push(kind, payload)

    def push(self, kind: int | None, payload: Any) -> None:
        if kind is not None:
            self.answered = True
        self._events.append((kind, payload))
        self.push_wake()  # (full or closed: a wake-up is pending, or nobody listens)

    def _drain(self, fd: int) -> None:
        try:
            os.read(fd, 1 << 12)
        except OSError:
            pass
        until = time.monotonic() + _DRAIN_SLICE_S
        while self._events and not self.closed:
            if time.monotonic() > until:  # the rest on the next wait, after the deadline's check
                self.push_wake()
                break
            kind, payload = self._events.popleft()
            if kind in (wire.STDOUT, wire.STDERR):
                self.output.feed("stdout" if kind == wire.STDOUT else "stderr", payload)
                self._consumed_all += len(payload)  # (before the ACK that lets the agent send more)
                self._consumed += len(payload)
                if self._consumed >= wire.ACK_EVERY:
                    consumed, self._consumed = self._consumed, 0
                    try:
                        self.link.send(wire.ACK, self.id, b"%d" % consumed)
                    except ContainerGone:
                        pass  # its end comes as the stream's
            elif kind == wire.EXIT:
                self.report = payload  # (checked by the reader: wire.read_exit)
                self.closed = self.ended = True
            elif kind is None:
                self.gone = self.closed = self.ended = True

    def push_wake(self) -> None:
        try:
            os.write(self._wake_w, b"x")
        except OSError:
            pass

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        now = time.monotonic()
        if self.link.stalled(now):
            self.stalled = self.gone = self.closed = self.ended = True
            return
        look = self.link.check_in(now)
        self._waiter.wait(max(0.0, min(timeout, look - now)), cancel)

    def kill(self) -> None:
        try:
            self.link.send(wire.KILL, self.id)
        except ContainerGone:
            pass  # its end comes as the stream's

    def close(self) -> None:
        self._waiter.remove(self._wake_r)
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)


def _ready(body: bytes) -> dict[str, Any]:
    """The agent's READY, checked (ValueError: not one)."""
    info = json.loads(body)
    if not (
        isinstance(info, dict)
        and isinstance(info.get("programs"), list)
        and all(isinstance(p, str) for p in info["programs"])
    ):
        raise ValueError(f"a READY that is not one: {body[:200]!r}")
    return info
