"""What a block's answer from the stateful session (``_session.Answer``)
becomes: its outcome, with the displays saved and the session's fate told."""

from __future__ import annotations

import base64
import itertools
import re
from dataclasses import replace

from ..._errors import WorkspaceError
from ..._models import Display, ErrorInfo, Limits
from ..._run_events import EventSink
from ..._workspace import Workspace
from .._process import OutputCallback
from .._result import Outcome, outcome_to_result
from ._session import Answer

__all__ = ["OUTPUT_DIR", "session_outcome"]

OUTPUT_DIR = "outputs"
_names = itertools.count(1)
# a display's mime type comes from the block's own process: a media type, or the display is dropped
_MEDIA_TYPE = re.compile(r"[A-Za-z0-9][\w.+-]{0,62}/[A-Za-z0-9][\w.+-]{0,126}", re.ASCII)


def session_outcome(
    language: str,
    answer: Answer,
    limits: Limits,
    workspace: Workspace,
    prefix: str,
    on_output: OutputCallback | None,
    *,
    before: str = "",
) -> Outcome:
    """A block's answer → its outcome: displays saved (images in
    ``outputs/``, bounded by ``Limits.max_output_bytes`` like a Jupyter
    cell's), the session's fate told last in the output. ``before``: a note
    on the session dying since the last block."""
    outcome = outcome_to_result(language, answer.process, limits)
    output = outcome.output
    displays, budget, dropped = [], limits.max_output_bytes, answer.dropped
    for item in answer.displays:
        mime, data = item.get("mime"), item.get("data")
        if not isinstance(mime, str) or not isinstance(data, str) or not _MEDIA_TYPE.fullmatch(mime):
            continue
        if len(data) > budget:
            dropped += 1
            continue
        budget -= len(data)
        if mime == "image/png":
            path = f"{OUTPUT_DIR}/{prefix}_{next(_names)}.png"
            try:
                workspace.write_bytes(path, base64.b64decode(data))
            except (
                WorkspaceError,
                OSError,
                ValueError,
            ) as exc:  # a link at outputs/, a full disk, bad base64
                output = _line(output, f"[{mime} not saved: {exc}]")
                continue
            display = Display(mime, path=path)
            output = _line(output, f"[{mime} saved to {path}]")
        else:
            display = Display(mime, data=data)
        displays.append(display)
        if isinstance(on_output, EventSink):
            on_output.display(display)
    if dropped:
        output = _line(
            output,
            f"[{dropped} display{'s' if dropped > 1 else ''} dropped: a block keeps at most "
            f"Limits.max_output_bytes={limits.max_output_bytes} bytes of displays]",
        )
    error = outcome.error
    if answer.died is not None:
        why = (
            f"The Python session died ({answer.died}): a fresh one runs the next block; "
            "variables and imports of earlier blocks are lost."
        )
        output = _line(output, why)
        if error is None or error.name not in ("MemoryLimit", "GpuMemoryLimit", "Timeout"):
            error = ErrorInfo("SessionDied", why, error.traceback if error is not None else "")
    if answer.note:
        output = _line(output, answer.note)
    if before:
        output = before + "\n" + output
    return replace(
        outcome,
        output=output,
        error=error,
        displays=tuple(displays),
        truncated=outcome.truncated or dropped > 0,
        status="failed" if answer.died is not None and outcome.status == "ok" else outcome.status,
    )


def _line(output: str, line: str) -> str:
    return (output if not output or output.endswith("\n") else output + "\n") + line + "\n"
