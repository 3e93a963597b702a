"""Running one piece of code in a Jupyter kernel and reading its messages
(the Jupyter messaging protocol: execute_request on shell, outputs on
iopub until the kernel is idle again).

Streams go to the bounded capture like every backend's output;
``execute_result`` and ``display_data`` become displays: one file per
display, its first of PNG, JPEG, SVG and HTML (a PIL image comes as both
PNG and JPEG: one ``display(img)`` is one image file, not two), saved where
the executor says (``_display_files``); text and JSON are kept inline; an
``error`` becomes the block's error, its traceback without ANSI colours.

Displays are bounded like the streams: each block keeps displays up to the
output limit (``Limits.max_output_bytes``), the rest dropped as they come,
not decoded nor saved (20 images of 1 MB under a 4 KiB limit had kept 60 MB
in the result and written 143 MB to the workspace). A display that cannot
be saved (a link planted at the output folder) is reported in the output.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..._errors import WorkspaceError
from ..._models import Display, ErrorInfo, Limits
from .._failures import timeout_note
from .._output import Capture
from .._result import Outcome
from .._watch import Cancellation, Output, OutputCallback, watch_loop
from ._channels import execute

__all__ = ["ANSWER_S", "CellOutcome", "cell_outcome", "kernel_stopped", "run_cell", "wait_done"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
POLL_S = 0.05
REPLY_GRACE_S = 1.0
# A kernel that sends nothing of a cell this long after it was sent (or, once
# the cell runs, this long while the kernel's process is stopped) is stalled
ANSWER_S = 10.0
# In order of preference: a display is saved as the first of these it has.
SAVED = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg", "text/html": ".html"}
BINARY = {"image/png", "image/jpeg"}
_names = itertools.count(1)

SaveFile = Callable[[str, bytes], str]  # (suggested name, data) -> workspace-relative path


@dataclass
class CellOutcome:
    status: str  # ok | error | timeout | cancelled | died | stalled
    capture: Capture
    error: ErrorInfo | None = None
    displays: list[Display] = field(default_factory=list)
    user_expressions: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    msg_id: str = ""
    display_bytes: int = 0  # displays kept, of the budget (the output limit)
    dropped_displays: int = 0
    dropped_bytes: int = 0
    answered: bool = False  # the kernel sent something of the cell (it may have started)

    def dropped_note(self) -> str:
        """What was dropped past the display budget ("" if nothing)."""
        count, size, limit = self.dropped_displays, self.dropped_bytes, self.capture.combined.limit
        if not count:
            return ""
        return (
            f"[{count} display{'s' if count > 1 else ''} ({size} bytes) dropped: a block keeps at most "
            f"Limits.max_output_bytes={limit} bytes of displays (images, HTML, JSON, text); "
            "save large results to files, or raise Limits.max_output_bytes]"
        )


def cell_outcome(cell: CellOutcome, note: str, limits: Limits) -> Outcome:
    """A finished cell → the block's outcome (the one place it happens).
    ``note``: what the executor did to the kernel afterwards (interrupted,
    restarted), added last to the output. A ``SystemExit`` is an exit code,
    as a process's would be; a shell block's code is the ``rc`` user
    expression."""
    cap = cell.capture
    output = cap.combined.text()
    for line in (cell.dropped_note(), note):  # the kernel's note last: a timeout's goes before it
        if line:
            output = (output if not output or output.endswith("\n") else output + "\n") + line + "\n"
    common: dict[str, Any] = dict(
        stdout=cap.stdout.text(),
        stderr=cap.stderr.text(),
        duration_s=cell.duration_s,
        truncated=cap.truncated or cell.dropped_displays > 0,
        displays=tuple(cell.displays),
    )
    if cell.status == "timeout":
        why = timeout_note(limits)
        output = output.removesuffix(note + "\n") + why + " " + note + "\n"
        return Outcome(
            status="timeout",
            exit_code=124,
            output=output,
            error=ErrorInfo("Timeout", why),
            timed_out=True,
            **common,
        )
    if cell.status == "cancelled":
        return Outcome(
            status="cancelled", exit_code=130, output=output, error=ErrorInfo("Cancelled", note), **common
        )
    if cell.status in ("died", "stalled"):
        return Outcome(status="failed", exit_code=137, output=output, error=cell.error, **common)
    if cell.status == "error":
        error = cell.error
        if error is not None and error.name == "SystemExit":
            code = _int(error.value, default=1)
            if code == 0:
                return Outcome(status="ok", exit_code=0, output=output, **common)
            return Outcome(status="failed", exit_code=code, output=output, error=error, **common)
        return Outcome(status="failed", exit_code=1, output=output, error=error, **common)
    rc = _int(cell.user_expressions.get("rc", "0"), default=0)
    if rc != 0:
        code = 128 - rc if rc < 0 else rc
        return Outcome(
            status="failed",
            exit_code=code,
            output=output,
            error=ErrorInfo("ExitStatus", f"exit code {code}"),
            **common,
        )
    return Outcome(status="ok", exit_code=0, output=output, **common)


def _int(text: str | None, default: int) -> int:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return default


def run_cell(
    kernel: Any,
    code: str,
    *,
    deadline: float,
    output_limit: int,
    cancel: Cancellation | None,
    on_output: OutputCallback | None,
    save: SaveFile,
    prefix: str,
    user_expressions: dict[str, str] | None = None,
) -> CellOutcome:
    """Execute ``code``; return when the kernel is idle again and has
    replied, the deadline passes, ``cancel`` is set, or the kernel dies
    (checked whenever nothing came for 50 ms), or stalls (``ANSWER_S``):
    ``_watch.watch_loop`` over the kernel's messages. On a deadline or a cancel the loop neither kills
    nor drains: the caller interrupts the kernel (``wait_done`` then waits
    for the cell), which keeps its state."""
    started = time.monotonic()
    msg_id = execute(kernel.channels, code, user_expressions=user_expressions)
    output = Output(output_limit, on_output)
    out = CellOutcome("ok", output.capture, msg_id=msg_id)
    timed_out, cancelled = watch_loop(
        _Messages(kernel, out, output, save, prefix), deadline=deadline, cancel=cancel, drain_s=0.0
    )
    if cancelled:
        out.status = "cancelled"
    elif timed_out:
        out.status = "timeout"
    out.duration_s = time.monotonic() - started
    return out


class _Messages:
    """A cell's messages as a ``_watch.Source``: over once the kernel is
    idle again and has replied (or has been idle for REPLY_GRACE_S: a reply
    lost on the way only takes the user expressions), or has died. Nothing
    to select on across ZMQ and WebSocket: ``cancel`` is polled, every
    POLL_S at most."""

    def __init__(self, kernel: Any, out: CellOutcome, output: Output, save: SaveFile, prefix: str) -> None:
        self.kernel, self.out, self.output, self.save, self.prefix = kernel, out, output, save, prefix
        self.closed = self.ended = False
        self._idle = self._replied = False
        self._idle_at = 0.0
        self._heard = time.monotonic()  # the cell was sent just now

    def kill(self) -> None:
        pass  # the caller interrupts the kernel

    def wait(self, timeout: float, cancel: Cancellation | None) -> None:
        if self._idle and time.monotonic() - self._idle_at > REPLY_GRACE_S:
            self.closed = self.ended = True
            return
        got = self.kernel.channels.recv(min(POLL_S, timeout))
        if got is None:
            if not self.kernel.alive():
                self.out.status = "died"
                self.closed = self.ended = True
            elif time.monotonic() - self._heard > ANSWER_S and (
                not self.out.answered or kernel_stopped(getattr(self.kernel, "pid", None))
            ):
                self.out.status = "stalled"
                self.closed = self.ended = True
            return
        channel, msg = got
        if msg.get("parent_header", {}).get("msg_id") != self.out.msg_id:
            return
        out, content = self.out, msg["content"]
        out.answered, self._heard = True, time.monotonic()
        if channel == "shell":
            self._replied = True
            for key, value in content.get("user_expressions", {}).items():
                if value.get("status") == "ok":
                    out.user_expressions[key] = value.get("data", {}).get("text/plain")
        else:
            kind = msg["msg_type"]
            if kind == "stream":
                self.output.feed_text(
                    "stderr" if content.get("name") == "stderr" else "stdout", _text(content.get("text", ""))
                )
            elif kind in ("execute_result", "display_data"):
                _display(out, content.get("data", {}), self.save, self.prefix, self.output)
            elif kind == "error":
                out.status = "error"
                traceback = _ANSI.sub("", "\n".join(content.get("traceback", [])))
                out.error = ErrorInfo(content.get("ename", "Error"), content.get("evalue", ""), traceback)
                self.output.feed_text("stderr", traceback + "\n")
            elif kind == "status" and content.get("execution_state") == "idle":
                self._idle, self._idle_at = True, time.monotonic()
        if self._idle and self._replied:
            self.closed = self.ended = True


def kernel_stopped(pid: int | None) -> bool:
    """The process ``pid`` (on this host) is stopped (SIGSTOP, a tracer)."""
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def wait_done(kernel: Any, msg_id: str, grace: float) -> bool:
    """After an interrupt: True once the cell ``msg_id`` is over (the kernel
    idle for it, or its reply came), its remaining messages read."""
    end = time.monotonic() + grace
    while time.monotonic() < end:
        got = kernel.channels.recv(POLL_S)
        if got is None:
            if not kernel.alive():
                return False
            continue
        channel, msg = got
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if channel == "shell" or (
            msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle"
        ):
            while kernel.channels.recv(0.02) is not None:  # the other of the two
                pass
            return True
    return False


def _display(out: CellOutcome, data: dict[str, Any], save: SaveFile, prefix: str, output: Output) -> None:
    if not isinstance(data, dict):  # the kernel is the block's: its messages may be anything
        return
    saved_any = False
    mime = next((m for m in SAVED if m in data), None)
    if mime is not None and _fits(out, data[mime]):
        raw = _text(data[mime])
        try:
            payload = base64.b64decode(raw) if mime in BINARY else raw.encode("utf-8", "replace")
            path = save(f"{prefix}_{next(_names)}{SAVED[mime]}", payload)
        except (WorkspaceError, OSError, ValueError) as exc:  # a link at outputs/, a full disk, bad base64
            output.feed_text("stdout", f"[{mime} not saved: {exc}]\n")
        else:
            out.displays.append(Display(mime, path=path))
            output.display(out.displays[-1])
            output.feed_text("stdout", f"[{mime} saved to {path}]\n")
            saved_any = True
    if "application/json" in data and _fits(out, data["application/json"]):
        out.displays.append(Display("application/json", data=json.dumps(data["application/json"])))
        output.display(out.displays[-1])
    text = data.get("text/plain")
    if text is not None:
        text = _text(text)
        if _fits(out, text):
            out.displays.append(Display("text/plain", data=text))
            output.display(out.displays[-1])
        if not saved_any:
            output.feed_text("stdout", text + "\n")  # the bounded output, kept or not


def _fits(out: CellOutcome, raw: Any) -> bool:
    """Count ``raw`` (one item of a display) against the block's display
    budget: False, and counted as dropped, once it does not fit."""
    size = len(raw) if isinstance(raw, str) else len(json.dumps(raw))  # base64 counted as sent
    if out.display_bytes + size > out.capture.combined.limit:
        out.dropped_displays += 1
        out.dropped_bytes += size
        return False
    out.display_bytes += size
    return True


def _text(raw: Any) -> str:
    return raw if isinstance(raw, str) else "".join(map(str, raw)) if isinstance(raw, list) else str(raw)
