"""The wire between the host and the agent in a container (``agent.py``):
the one definition both sides use (the agent imports it from its folder,
bound in read-only; the host as ``execbox.backends.docker._agent.wire``).
Standard library only, Python 3.6 or later (it runs in any image's Python).

Both ways it is a stream of frames: a 9-byte header (kind, block id,
payload size; big-endian) and the payload. The host writes them to the
container's attached stdin; the agent writes them to its stdout, which the
engine hands the host multiplexed with the agent's stderr (its own
diagnostics, never a block's output). A block id tags every frame of a
block, so that blocks of one executor can run at the same time.

Host to agent: HELLO (payload: nothing; answered by READY, a JSON object:
the agent's pid, the programs found on PATH, the Python version), RUN (JSON:
``argv``, ``python`` (the file to run in the agent's interpreter, or null:
exec ``argv``), ``token``, ``workdir``, ``deadline_s`` (the agent kills the
block that long after its start, whatever the host does: the host's
timeout, and a little more)), KILL (nothing: kill the block and
what it started), ACK (the count of a block's output bytes the host has
consumed, in decimal), PING (nothing: answered by PONG). Agent to host:
STARTED (nothing: the block's RUN was read and its process forked), STDOUT
and STDERR (the block's bytes, in the order they were read), EXIT (JSON:
``code`` as a shell gives it, 128+N for a signal; ``oom_kills``, the
container's OOM kill count after a SIGKILL, when it can be read; ``note``,
a word from the agent; ``timed_out``, true when the agent killed the block
at its deadline), PONG.

Every frame is bounded: a payload of at most MAX_PAYLOAD bytes (a pipe
read of a block's output), a frame of the agent's own (READY, STARTED,
EXIT, PONG) of at most MAX_CONTROL; ``Frames`` raises ValueError on a
larger one, and ``read_exit`` on an EXIT that is not one. A side that
meets one stops trusting the stream (the host kills the container).

Flow control: the agent sends at most WINDOW bytes of a block's output
that the host has not acknowledged; past that it stops reading the block's
pipes (the block then waits on its writes, as it would on a slow terminal),
so the host's queue of a block's frames is bounded, whatever the block
prints and however slowly the host's ``on_output`` consumes it.
"""

import json
import struct

__all__ = [
    "ACK",
    "ACK_EVERY",
    "EXIT",
    "HEADER",
    "HELLO",
    "KILL",
    "MAX_CONTROL",
    "MAX_PAYLOAD",
    "PING",
    "PONG",
    "READY",
    "RUN",
    "STARTED",
    "STDERR",
    "STDOUT",
    "WINDOW",
    "Frames",
    "check_from_agent",
    "pack",
    "pack_json",
    "read_exit",
]

HEADER = struct.Struct(">BII")
HELLO, READY, RUN, KILL, STDOUT, STDERR, EXIT = (ord(c) for c in "hrbkoex")
STARTED, ACK, PING, PONG = (ord(c) for c in "sapq")
# A frame's payload at most: output is sent in chunks of a pipe read (64 KiB)
MAX_PAYLOAD = 1 << 16
# The payload of a frame of the agent's own at most (READY, STARTED, EXIT, PONG)
MAX_CONTROL = 4096
FROM_AGENT = frozenset({READY, STARTED, STDOUT, STDERR, EXIT, PONG})
# A block's output bytes in flight (sent, not yet acknowledged) at most; the
# host acknowledges every ACK_EVERY bytes it has consumed
WINDOW = 128 << 10
ACK_EVERY = 64 << 10


def pack(kind, block, payload=b""):
    return HEADER.pack(kind, block, len(payload)) + payload


def pack_json(kind, block, value):
    return pack(kind, block, json.dumps(value).encode())


class Frames:
    """Whole frames out of a byte stream that arrives in pieces."""

    def __init__(self):
        self._buffer = b""

    def feed(self, data):
        """The frames completed by ``data``: (kind, block, payload) each.
        Raises ValueError on a frame no agent or host sends (too large)."""
        buffer = self._buffer + data if self._buffer else data
        frames, at = [], 0
        while len(buffer) - at >= HEADER.size:
            kind, block, size = HEADER.unpack_from(buffer, at)
            if size > MAX_PAYLOAD:
                raise ValueError(f"a frame of {size} bytes (at most {MAX_PAYLOAD})")
            end = at + HEADER.size + size
            if len(buffer) < end:
                break
            frames.append((kind, block, buffer[at + HEADER.size : end]))
            at = end
        self._buffer = buffer[at:]
        return frames


def check_from_agent(kind, size):
    """Raises ValueError on a frame the agent never sends: an unknown kind,
    a frame of its own larger than MAX_CONTROL."""
    if kind not in FROM_AGENT:
        raise ValueError(f"a frame of unknown kind {kind}")
    if kind not in (STDOUT, STDERR) and size > MAX_CONTROL:
        raise ValueError(f"a {chr(kind)!r} frame of {size} bytes (at most {MAX_CONTROL})")


def read_exit(payload):
    """An EXIT's report, checked: a dict whose ``code`` is an exit status
    (0-255), ``oom_kills`` a count or null, ``note`` a string, ``timed_out``
    a bool; raises ValueError on anything else."""
    try:
        report = json.loads(payload.decode("utf-8"))
    except RecursionError:
        raise ValueError("an EXIT nested too deep") from None
    if not isinstance(report, dict):
        raise ValueError(f"an EXIT of {type(report).__name__}, not an object")
    code = report.get("code")
    if type(code) is not int or not 0 <= code <= 255:
        raise ValueError(f"an EXIT whose code is {code!r:.40}")
    kills = report.get("oom_kills")
    if kills is not None and (type(kills) is not int or kills < 0):
        raise ValueError(f"an EXIT whose oom_kills is {kills!r:.40}")
    if not isinstance(report.get("note", ""), str) or not isinstance(report.get("timed_out", False), bool):
        raise ValueError("an EXIT whose note or timed_out is of the wrong type")
    return report
