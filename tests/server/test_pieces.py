"""Answers that carry a block's output are sent in pieces (``_pieces``):
the same bytes as encoding them whole (``JSONResponse``, ``_wire.sse``, an
NDJSON line), with the same ``Content-Length``, and never the answer's
text whole in the server's memory."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import httpx
import pytest

from execbox.server import _pieces
from execbox.server._pieces import json_answer, json_line, json_pieces, ndjson_frames, sse_frames
from execbox.server._wire import sse
from tests.server._http import Server

VALUES: list[Any] = [
    {
        "text": "plain " * 40 + 'é€😀\n\t"\\\x01\x7f\u2028' * 30,
        "items": [1, -2, 2.5, 1e308, None, True, False, [], {}, "", {"k": "v" * 50}],
        "nested": {"a": [{"b": ["c" * 33]}]},
        3: "a key json.dumps turns into a string",
    },
    "s" * 100,
    [("a tuple", "t" * 40)],
    "",
    42,
]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize(
    "options", [{}, {"ensure_ascii": False, "separators": (",", ":"), "allow_nan": False}]
)
def test_the_pieces_join_to_json_dumps(
    value: Any, options: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_pieces, "PIECE", 7)  # every string of the values is cut
    pieces = list(json_pieces(value, **options))
    assert "".join(pieces) == json.dumps(value, **options)
    assert max(map(len, pieces)) <= 6 * 7 + 2 or not isinstance(value, str)


@pytest.mark.parametrize("value", VALUES)
def test_event_frames_are_the_whole_frames(value: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_pieces, "PIECE", 7)
    monkeypatch.setattr(_pieces, "SMALL", 0)  # the pieces' way, however small
    assert b"".join(sse_frames(9, "end", value)) == sse(9, "end", value)
    line = {"id": 9, "event": "end", "data": value}
    assert b"".join(ndjson_frames(9, "end", value)) == json.dumps(line).encode() + b"\n"
    assert b"".join(json_line(value)) == json.dumps(value).encode() + b"\n"


def test_a_large_answer_is_never_whole_in_memory() -> None:
    text = "x" * (16 << 20)
    summary = {"result": {"output": text, "stdout": text, "blocks": [{"output": text, "stdout": text}]}}
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        sent = sum(len(piece) for piece in sse_frames(1, "end", summary))
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert sent > 4 * len(text)
    assert peak < 1 << 20, f"the end event of a 64 MiB answer held {peak} bytes at once"
    answer = json_answer(summary)
    assert answer.headers["content-length"] == str(
        len(json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode())
    )


WIDE = (
    "import sys\n"
    "line = 'wide é€😀 \"quoted\" back\\\\slash \\t tab \\x01 ' * 8 + '\\n'\n"
    "for i in range(4000):\n"
    "    sys.stdout.write(line)\n"
    "    if i % 500 == 0:\n"
    "        sys.stdout.flush(); sys.stderr.write(f'err {i} \\u2028\\n'); sys.stderr.flush()\n"
)


def test_a_large_answer_is_the_same_bytes_as_before(server: Server, client: httpx.Client) -> None:
    """1.5 MiB of text with every kind of escape, in JSON, SSE and NDJSON:
    each answer is what encoding it whole gives, with its Content-Length."""
    made = client.post("/v1/sessions", json={"limits": {"max_output_bytes": 4 << 20}})
    assert made.status_code == 201, made.text
    sid = made.json()["id"]
    answer = client.post(f"/v1/sessions/{sid}/executions", json={"code": WIDE})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert len(body["result"]["output"]) > 1 << 20 and "err 3500" in body["result"]["stderr"]
    whole = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    assert answer.content == whole
    assert answer.headers["content-length"] == str(len(whole)) and "transfer-encoding" not in answer.headers
    assert answer.headers["content-type"] == "application/json"

    eid = body["id"]
    shown = client.get(f"/v1/sessions/{sid}/executions/{eid}")
    assert shown.content == json.dumps(shown.json(), ensure_ascii=False, separators=(",", ":")).encode()
    with client.stream(
        "GET", f"/v1/sessions/{sid}/executions/{eid}/events", headers={"Accept": "text/event-stream"}
    ) as stream:
        raw = stream.read()
    end = raw[raw.rindex(b"id: ") :]
    data = json.loads(end.split(b"\ndata: ", 1)[1])
    assert data["result"] == body["result"]
    assert end == sse(int(end[4:].split(b"\n")[0]), "end", data)
    with client.stream(
        "GET", f"/v1/sessions/{sid}/executions/{eid}/events", headers={"Accept": "application/x-ndjson"}
    ) as stream:
        lines = stream.read().splitlines(keepends=True)
    last = json.loads(lines[-1])
    assert last["event"] == "end" and last["data"]["result"] == body["result"]
    assert lines[-1] == json.dumps(last).encode() + b"\n"
