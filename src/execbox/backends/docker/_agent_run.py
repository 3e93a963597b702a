"""One block run through the agent (``run_block``): its RUN sent on the
link, its output watched until its end, its deadline or a cancel, and what
the link's state says of it then. A block the agent never took raises
(``ContainerGone``, ``AgentStalled``: nothing ran, it may run in a new
container); a link that can no longer be trusted is closed and its
container killed (``_link``'s docstring says when)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from .._process import Cancellation, OutputCallback, new_token
from .._watch import DRAIN_GRACE_S, FdWaiter, Output, watch_loop
from ._agent import wire
from ._exec import ContainerGone
from ._link import ANSWER_S, DEADLINE_GRACE_S, AgentBlock, AgentLink, AgentOutcome, AgentStalled

__all__ = ["run_block"]


def run_block(
    link: AgentLink,
    *,
    argv: list[str],
    python_file: str | None,
    workdir: str,
    timeout_s: float,
    stdin_path: str | None = None,
    env: dict[str, str] | None = None,
    output_limit: int,
    cancel: Cancellation | None,
    on_output: OutputCallback | None,
    kill_container: Callable[[], None],
) -> AgentOutcome:
    """Run one block through the agent; exit codes as ``run_process`` gives
    them (124 on timeout, ``timeout_s`` counted from the agent's STARTED).
    Raises ContainerGone when the agent is gone or stalled before it took
    the block (nothing ran: it may run elsewhere)."""
    started = time.monotonic()
    output = Output(output_limit, on_output)
    request: dict[str, Any] = {
        "argv": argv,
        "python": python_file,
        "token": new_token(),
        "workdir": workdir,
        "deadline_s": timeout_s + DEADLINE_GRACE_S,
    }
    if stdin_path is not None:  # opened by the block's process, as the block user
        request["stdin"] = stdin_path
    if env:  # a compiler's (a language's build cache)
        request["env"] = env
    with FdWaiter() as waiter:
        block = link.open_block(waiter, output)
        try:
            timed_out, cancelled = _send_and_watch(link, block, request, timeout_s, cancel)
        except BaseException:
            block.kill()  # (an on_output that raised): nothing of the block outlives the call
            raise
        finally:
            link.forget(block)
            block.close()
    died, malformed = _settle(link, block, kill_container, stopped=timed_out or cancelled)
    timed_out = timed_out or (not died and block.report.get("timed_out", False))
    code = 124 if timed_out else 137 if died else block.report["code"]
    return AgentOutcome(
        exit_code=code,
        capture=output.capture,
        timed_out=timed_out,
        cancelled=cancelled,
        duration_s=time.monotonic() - started,
        oom_kills=block.report.get("oom_kills"),
        agent_died=died and not (timed_out or cancelled),
        agent_stalled=died and link.was_stalled,
        malformed=malformed,
    )


def _send_and_watch(
    link: AgentLink, block: AgentBlock, request: dict[str, Any], timeout_s: float, cancel: Cancellation | None
) -> tuple[bool, bool]:
    """Send the block's RUN and watch it until its end, its deadline or a
    cancel; a block stopped so gets DRAIN_GRACE_S to report its end.
    (timed out, cancelled); neither when the agent did not take the RUN."""
    try:
        link.send(wire.RUN, block.id, json.dumps(request).encode(), question=True)
    except AgentStalled:
        block.stalled = True
        return False, False
    # the block's time starts when the agent takes it (STARTED): under a burst the agent
    # works through the RUNs before it in turn; waiting for it is bounded by ANSWER_S
    while not (block.answered or block.closed or (cancel is not None and cancel.is_set())):
        block.wait(ANSWER_S, cancel)
    timed_out, cancelled = watch_loop(block, deadline=time.monotonic() + timeout_s, cancel=cancel)
    if timed_out or cancelled:  # (a cancellation before the start is not waited for by the loop)
        until = time.monotonic() + DRAIN_GRACE_S
        while not block.closed and time.monotonic() < until:
            block.wait(until - time.monotonic(), None)
    return timed_out, cancelled


def _settle(
    link: AgentLink, block: AgentBlock, kill_container: Callable[[], None], *, stopped: bool
) -> tuple[bool, str | None]:
    """Whether the agent died under the block, and why its stream is
    malformed if it is. A link that cannot be trusted is closed and its
    container killed; a block the agent never took raises (``stopped``: it
    timed out or was cancelled, and ends as such)."""
    died = block.gone
    malformed = link.malformed if died else None
    if block.stalled or not block.closed or malformed:
        # stalled, it did not report the killed block's end, or its stream was malformed: it cannot be trusted
        kill_container()
        link.close()
        died = True
    # a block the agent never took may run in a new container; not where the stream was malformed (its
    # STARTED may be what was lost)
    if died and not block.answered and not block.report and not malformed:
        if block.stalled:
            raise AgentStalled(
                f"execbox's agent did not answer for {ANSWER_S:.0f} s (stopped from "
                "outside?); its container was killed"
            )
        if not stopped:
            raise ContainerGone(link.dead or "the agent's stream ended")
    return died, malformed
