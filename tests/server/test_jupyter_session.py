"""A Jupyter session keeps its state between executions, and reset clears
it; its displays stream as they are shown."""

from __future__ import annotations

import importlib.util

from httpx_sse import connect_sse

from tests.conftest import require
from tests.server._http import open_session, running_server


def test_a_jupyter_session_keeps_state():
    found = all(importlib.util.find_spec(m) for m in ("jupyter_client", "ipykernel"))
    require("jupyter", found, "pip install 'execbox[jupyter]' (./dev.sh does)")
    with running_server("--backend", "jupyter") as server, server.client(timeout=120) as client:
        session = open_session(client)
        assert session["stateful"] is True
        sid = session["id"]
        client.post(f"/v1/sessions/{sid}/executions", json={"code": "x = 41"})
        kept = client.post(f"/v1/sessions/{sid}/executions", json={"code": "print(x + 1)"}).json()
        assert kept["status"] == "completed" and kept["result"]["stdout"] == "42\n", kept
        assert client.post(f"/v1/sessions/{sid}/reset").status_code == 200
        lost = client.post(f"/v1/sessions/{sid}/executions", json={"code": "print(x)"}).json()
        assert lost["result"]["error"]["name"] == "NameError"
        shown = (
            "from IPython.display import display, SVG\nimport time\n"
            "display(SVG('<svg xmlns=\"http://www.w3.org/2000/svg\"/>'))\nprint('after', flush=True)\n"
            "time.sleep(0.2)\n21 * 2"
        )
        with connect_sse(client, "POST", f"/v1/sessions/{sid}/executions", json={"code": shown}) as source:
            events = [(e.event, e.json()) for e in source.iter_sse()]
        names = [name for name, _ in events]
        displays = [data for name, data in events if name == "display"]
        assert displays[0]["mime_type"] == "image/svg+xml" and displays[0]["path"], displays
        assert displays[-1] == {"block": 0, "mime_type": "text/plain", "path": None, "data": "42"}
        assert names.index("display") < names.index("stdout") < names.index("block_end")  # as they came
        client.delete(f"/v1/sessions/{sid}")
