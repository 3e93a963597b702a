"""A Jupyter session keeps its state between executions, and reset clears it."""

from __future__ import annotations

import importlib.util

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
        client.delete(f"/v1/sessions/{sid}")
