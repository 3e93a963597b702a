"""The run's events (``stream``, ``astream``, ``on_event``), against every
backend in conftest.BACKENDS."""

from __future__ import annotations

import asyncio
import time
import uuid

from execbox import BlockEndEvent, BlockStartEvent, CodeBlock, EndEvent, OutputEvent, RunEvent, StartEvent
from tests.conftest import marked, wait_dead

# Prints, then waits for the test to answer through a file: output that only
# came at the block's end would leave the test waiting and the block timing out.
HANDSHAKE = (
    "import os, time\nprint('ready', flush=True)\nfor _ in range(400):\n"
    "    if os.path.exists('go'):\n        break\n    time.sleep(0.05)\n"
    "print('went' if os.path.exists('go') else 'nobody answered')\n"
)


def test_events_come_in_order_and_end_with_the_result(executor):
    blocks = [
        CodeBlock("python", "import sys\nprint('a')\nprint('b', file=sys.stderr)"),
        CodeBlock("python", "print('c')\nraise SystemExit(3)"),
        CodeBlock("python", "print('never')"),
    ]
    events = list(executor.stream(blocks))
    assert all(isinstance(e, RunEvent) for e in events)
    assert isinstance(events[0], StartEvent) and events[0].blocks == 3
    assert isinstance(events[-1], EndEvent) and events[-1].status == "completed"
    result = events[-1].result
    assert result is not None and result.exit_code == 3 and len(result.blocks) == 2
    starts = [e.index for e in events if isinstance(e, BlockStartEvent)]
    ends = [(e.index, e.exit_code) for e in events if isinstance(e, BlockEndEvent)]
    assert starts == [0, 1] and ends == [(0, 0), (1, 3)]
    text = {(e.block, e.stream): "" for e in events if isinstance(e, OutputEvent)}
    for e in events:
        if isinstance(e, OutputEvent):
            text[e.block, e.stream] += e.text
    assert text[0, "stdout"] == "a\n" and text[0, "stderr"] == "b\n" and text[1, "stdout"] == "c\n"
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("BlockEndEvent") < max(
        i for i, e in enumerate(events) if isinstance(e, BlockStartEvent)
    )  # block 0 ended before 1 began


def test_output_arrives_while_the_block_runs(executor):
    events = executor.stream(CodeBlock("python", HANDSHAKE))
    seen = ""
    for event in events:
        if isinstance(event, OutputEvent):
            seen += event.text
            if (
                "ready" in seen and executor.name == "remote"
            ):  # the mirror sends files before a run, not during
                executor.session.upload("go", "")
            elif "ready" in seen and executor.name == "ray":  # nor does a run on a Ray node
                executor.upload("go", "")
            elif "ready" in seen:
                (executor.workspace.path / "go").write_text("")
        if isinstance(event, EndEvent):
            assert event.result is not None and "went" in event.result.output, event.result.output
            break
    else:
        raise AssertionError("no end event")


def test_closing_the_stream_kills_the_run(executor):
    if getattr(executor, "runtime", None) == "runsc":
        return  # gVisor's processes are not visible from the host; checked under runc
    marker = f"execbox-stream-{uuid.uuid4().hex}"
    code = (
        "import os, sys\n"
        f"os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', '{marker}'])"
    )
    events = executor.stream(CodeBlock("python", code))
    for event in events:
        if isinstance(event, BlockStartEvent):
            break
    for _ in range(200):
        if marked(marker):
            break
        time.sleep(0.05)
    assert marked(marker), "the block never started"
    events.close()
    assert wait_dead(marked(marker)) == []
    assert executor.run(CodeBlock("python", "print('still works')")).output == "still works\n"


def test_astream_and_on_event_see_what_stream_sees(executor):
    block = CodeBlock("python", "print('x')")

    async def collect() -> list[RunEvent]:
        return [e async for e in executor.astream(block)]

    streamed = asyncio.run(collect())
    called: list[RunEvent] = []
    result = executor.run(block, on_event=called.append)
    for events in (streamed, called):
        kinds = [type(e).__name__ for e in events]
        collapsed = [
            k for i, k in enumerate(kinds) if k != "OutputEvent" or kinds[i - 1] != k
        ]  # a write may come in pieces
        assert collapsed == ["StartEvent", "BlockStartEvent", "OutputEvent", "BlockEndEvent", "EndEvent"]
        assert "".join(e.text for e in events if isinstance(e, OutputEvent)) == "x\n"
        assert events[-1].result.output == result.output == "x\n"
