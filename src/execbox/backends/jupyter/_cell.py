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
from ..._models import Display, ErrorInfo
from .._output import Capture
from .._process import Cancellation, OutputCallback
from ._channels import execute

__all__ = ["CellOutcome", "run_cell", "wait_done"]

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
POLL_S = 0.05
REPLY_GRACE_S = 1.0
# In order of preference: a display is saved as the first of these it has.
SAVED = {"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg", "text/html": ".html"}
BINARY = {"image/png", "image/jpeg"}
_names = itertools.count(1)

SaveFile = Callable[[str, bytes], str]  # (suggested name, data) -> workspace-relative path


@dataclass
class CellOutcome:
    status: str  # ok | error | timeout | cancelled | died
    capture: Capture
    error: ErrorInfo | None = None
    displays: list[Display] = field(default_factory=list)
    user_expressions: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    msg_id: str = ""
    display_bytes: int = 0  # displays kept, of the budget (the output limit)
    dropped_displays: int = 0
    dropped_bytes: int = 0

    def dropped_note(self) -> str:
        """What was dropped past the display budget ("" if nothing)."""
        count, size, limit = self.dropped_displays, self.dropped_bytes, self.capture.combined.limit
        if not count:
            return ""
        return (f"[{count} display{'s' if count > 1 else ''} ({size} bytes) dropped: a block keeps at most "
                f"Limits.max_output_bytes={limit} bytes of displays (images, HTML, JSON, text); "
                "save large results to files, or raise Limits.max_output_bytes]")


def run_cell(kernel: Any, code: str, *, deadline: float, output_limit: int, cancel: Cancellation | None,
             on_output: OutputCallback | None, save: SaveFile, prefix: str,
             user_expressions: dict[str, str] | None = None) -> CellOutcome:
    """Execute ``code``; return when the kernel is idle again and has
    replied, the deadline passes, ``cancel`` is set, or the kernel dies
    (checked whenever nothing came for 50 ms). On a deadline or a cancel the
    caller interrupts the kernel (``wait_done`` then waits for the cell)."""
    started = time.monotonic()
    channels = kernel.channels
    msg_id = execute(channels, code, user_expressions=user_expressions)
    out = CellOutcome("ok", Capture(output_limit), msg_id=msg_id)
    idle = replied = False
    idle_at = 0.0
    while not (idle and replied):
        now = time.monotonic()
        if cancel is not None and cancel.is_set():
            out.status = "cancelled"
            break
        if now >= deadline:
            out.status = "timeout"
            break
        if idle and now - idle_at > REPLY_GRACE_S:
            break  # idle means done; a reply lost on the way only takes the user expressions
        got = channels.recv(min(POLL_S, max(0.0, deadline - now)))
        if got is None:
            if not kernel.alive():
                out.status = "died"
                break
            continue
        channel, msg = got
        if msg.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        content = msg["content"]
        if channel == "shell":
            replied = True
            for key, value in content.get("user_expressions", {}).items():
                if value.get("status") == "ok":
                    out.user_expressions[key] = value.get("data", {}).get("text/plain")
            continue
        kind = msg["msg_type"]
        if kind == "stream":
            name = "stderr" if content.get("name") == "stderr" else "stdout"
            _feed(out, name, _text(content.get("text", "")), on_output)
        elif kind in ("execute_result", "display_data"):
            _display(out, content.get("data", {}), save, prefix, on_output)
        elif kind == "error":
            out.status = "error"
            traceback = _ANSI.sub("", "\n".join(content.get("traceback", [])))
            out.error = ErrorInfo(content.get("ename", "Error"), content.get("evalue", ""), traceback)
            _feed(out, "stderr", traceback + "\n", on_output)
        elif kind == "status" and content.get("execution_state") == "idle":
            idle, idle_at = True, time.monotonic()
    out.duration_s = time.monotonic() - started
    return out


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
        if channel == "shell" or (msg["msg_type"] == "status"
                                  and msg["content"].get("execution_state") == "idle"):
            while kernel.channels.recv(0.02) is not None:  # the other of the two
                pass
            return True
    return False


def _feed(out: CellOutcome, stream: str, text: str, on_output: OutputCallback | None) -> None:
    if not text:
        return
    out.capture.feed(stream, text.encode("utf-8", "replace"))
    if on_output is not None:
        on_output(stream, text)


def _display(out: CellOutcome, data: dict[str, Any], save: SaveFile, prefix: str,
             on_output: OutputCallback | None) -> None:
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
            _feed(out, "stdout", f"[{mime} not saved: {exc}]\n", on_output)
        else:
            out.displays.append(Display(mime, path=path))
            _feed(out, "stdout", f"[{mime} saved to {path}]\n", on_output)
            saved_any = True
    if "application/json" in data and _fits(out, data["application/json"]):
        out.displays.append(Display("application/json", data=json.dumps(data["application/json"])))
    text = data.get("text/plain")
    if text is not None:
        text = _text(text)
        if _fits(out, text):
            out.displays.append(Display("text/plain", data=text))
        if not saved_any:
            _feed(out, "stdout", text + "\n", on_output)  # the bounded output, kept or not


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
