"""Who may do what on ``execbox serve`` (README, "Service security
model"): a token by default, made at start and printed once in the
playground's link; ``--no-token`` only on loopback, with a warning; a
session's key, answered once, asked for by every request on the session,
so that a second client holding the server's token but not the key can
neither drive, read nor delete it; and a session's ``env`` is data for its
blocks, never configuration of the server's own processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.conftest import require
from tests.server._http import KEY_HEADER, SRC, error_of, open_session, running_server


@pytest.fixture(scope="module")
def made() -> object:
    """A server started as a person starts it: no --token, no EXECBOX_TOKEN."""
    with running_server("--backend", "local", token="") as running:
        yield running


def test_a_token_is_made_printed_once_in_the_link_and_required(made) -> None:
    assert made.link == f"{made.url}/?token={made.token}" and len(made.token) >= 32
    log = made.log_text()
    # printed only at the start: in the link, and in /run_code's URL for veRL (the same announcement)
    assert log.count(made.token) == 2 and log.count(f"/t/{made.token}/run_code") == 1
    with httpx.Client(base_url=made.url) as bare:
        for method, path in (
            ("GET", "/v1/info"),
            ("POST", "/v1/run"),
            ("POST", "/v1/sessions"),
        ):
            error = error_of(bare.request(method, path, json={"code": "print(1)"}), 401, "unauthorized")
            assert "Authorization: Bearer" in error["message"]
        wrong = bare.get("/v1/info", headers={"Authorization": "Bearer " + made.token[:-1]})
        error_of(wrong, 401, "unauthorized")
        assert bare.get("/").status_code == 200  # the page, which reads the token from its link
        assert bare.get("/openapi.json").status_code == 200  # the API's description: no secret
    with made.client() as client:
        assert client.post("/v1/run", json={"code": "print(6 * 7)"}).json()["stdout"] == "42\n"


def test_another_server_makes_another_token() -> None:
    from execbox.server import ServerConfig

    one, two = ServerConfig(backend="local"), ServerConfig(backend="local")
    assert one.token_generated and one.token and one.token != two.token
    assert one.token not in repr(one)  # a config in a log shows no secret
    given = ServerConfig(backend="local", token="mine")
    assert given.token == "mine" and not given.token_generated


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "execbox.cli", "serve", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=30,
        env={"PYTHONPATH": SRC, "PATH": "/usr/bin"},
    )


@pytest.mark.parametrize(
    "args, said",
    [
        (("--host", "0.0.0.0", "--no-token"), "without a token (--no-token)"),
        (("--host", "192.0.2.1", "--no-token"), "listen on 127.0.0.1"),
        (("--no-token", "--token", "t"), "choose one"),
        (("--token", "two words"), "without spaces"),
    ],
)
def test_no_token_only_on_loopback_and_never_with_one(args, said) -> None:
    done = _serve(*args)
    assert done.returncode == 2 and said in done.stderr, done.stderr


def test_no_token_on_loopback_serves_with_a_warning(tmp_path: Path) -> None:
    with running_server("--backend", "local", "--no-token", log=tmp_path / "log") as server:
        assert server.token is None
        with httpx.Client(base_url=server.url) as bare:
            assert bare.get("/v1/info").status_code == 200
            sid = open_session(bare)["id"]
            # without a token, a session is still its key's
            error_of(bare.get(f"/v1/sessions/{sid}"), 403, "session_key_required")
        warning = server.log_text()
        assert "WARNING: --no-token: every user and program on this machine can run code" in warning
        assert "?token=" not in warning


def _routes(sid: str, eid: str) -> list[tuple[str, str, dict]]:
    return [
        ("GET", f"/v1/sessions/{sid}", {}),
        ("POST", f"/v1/sessions/{sid}/keepalive", {}),
        ("POST", f"/v1/sessions/{sid}/reset", {}),
        ("POST", f"/v1/sessions/{sid}/executions", {"json": {"code": "print('not yours')"}}),
        ("GET", f"/v1/sessions/{sid}/executions/{eid}", {}),
        ("GET", f"/v1/sessions/{sid}/executions/{eid}/events", {}),
        ("POST", f"/v1/sessions/{sid}/executions/{eid}/cancel", {}),
        ("GET", f"/v1/sessions/{sid}/files", {}),
        ("GET", f"/v1/sessions/{sid}/files/secret.txt", {}),
        ("PUT", f"/v1/sessions/{sid}/files/secret.txt", {"content": b"overwritten"}),
        ("DELETE", f"/v1/sessions/{sid}/files/secret.txt", {}),
        ("DELETE", f"/v1/sessions/{sid}", {}),
    ]


def test_every_session_route_needs_the_session_key(server) -> None:
    with server.client(session_keys=False) as owner, server.client(session_keys=False) as other:
        answer = open_session(owner)
        sid, key = answer["id"], answer["key"]
        assert key and key not in sid and len(key) >= 40
        mine = {KEY_HEADER: key}
        owner.put(f"/v1/sessions/{sid}/files/secret.txt", content=b"the owner's", headers=mine)
        ran = owner.post(f"/v1/sessions/{sid}/executions", json={"code": "print(1)"}, headers=mine)
        eid = ran.json()["id"]
        for sent in ({}, {KEY_HEADER: "sk_wrong"}, {KEY_HEADER: key[:-1]}, {KEY_HEADER: ""}):
            for method, path, body in _routes(sid, eid):
                error = error_of(
                    other.request(method, path, headers=sent, **body), 403, "session_key_required"
                )
                assert KEY_HEADER in error["message"], (method, path)
        # nothing of it was done: the file is the owner's still, the session open, one execution in it
        assert owner.get(f"/v1/sessions/{sid}/files/secret.txt", headers=mine).content == b"the owner's"
        info = owner.get(f"/v1/sessions/{sid}", headers=mine).json()
        assert info["state"] == "open" and info["executions"] == [eid]
        assert owner.delete(f"/v1/sessions/{sid}", headers=mine).status_code == 200
        # once ended: 410 for its key, 403 for any other (its end says nothing to them)
        assert error_of(owner.get(f"/v1/sessions/{sid}", headers=mine), 410, "session_expired")
        error_of(
            other.get(f"/v1/sessions/{sid}", headers={KEY_HEADER: "sk_wrong"}), 403, "session_key_required"
        )
        error_of(other.get("/v1/sessions/s_000000000000000000000000", headers=mine), 404, "not_found")


def test_the_key_is_answered_once_and_shown_nowhere_else(server) -> None:
    from execbox import Client

    with server.client(session_keys=False) as raw:
        answer = open_session(raw)
        key = answer["key"]
        assert answer.get("key") and "no-store" in raw.post("/v1/sessions", json={}).headers["cache-control"]
        shown = raw.get(f"/v1/sessions/{answer['id']}", headers={KEY_HEADER: key}).text
        info = raw.get("/v1/info").text
        assert key not in shown and '"key"' not in shown and key not in info
    with Client(server.url, server.token) as client, client.session() as session:
        assert session.run("print('with its key')").stdout == "with its key\n"
        assert session.key not in repr(session) and "key" not in session.info()


def test_a_second_client_with_the_token_but_not_the_key_cannot_use_a_clients_session(server) -> None:
    from execbox import Client

    with Client(server.url, server.token) as first, first.session() as session:
        session.upload("notes.txt", "mine")
        with server.client(session_keys=False) as second:
            ran = second.post(f"/v1/sessions/{session.id}/executions", json={"code": "print(1)"})
            read = second.get(f"/v1/sessions/{session.id}/files/notes.txt")
            deleted = second.delete(f"/v1/sessions/{session.id}")
        for answer in (ran, read, deleted):
            error_of(answer, 403, "session_key_required")
        assert session.download("notes.txt") == b"mine" and session.info()["executions"] == []


PLANTED = """import os, sys
with open(os.path.join({where!r}, "ran-%d" % os.getpid()), "w") as out:
    out.write(" ".join(sys.argv))
"""


def test_a_sessions_env_configures_its_blocks_never_the_servers_processes(tmp_path: Path) -> None:
    """A Python start-up hook planted on the host and named by a session's
    env (PYTHONPATH's sitecustomize, PYTHONSTARTUP, PYTHONHOME, LD_PRELOAD)
    runs in no process of the server (the zygote, the pool's units, the
    jail's helpers), at start, at a run, at a reset; the blocks see the env."""
    from execbox.backends.sandbox import find_bwrap

    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap")
    planted = tmp_path / "planted"
    planted.mkdir(mode=0o755)
    for name in ("sitecustomize.py", "usercustomize.py", "startup.py"):
        (planted / name).write_text(PLANTED.format(where=str(planted)))
    planted.chmod(0o777)  # whichever identity imports it can leave its mark
    env = {
        "PYTHONPATH": str(planted),
        "PYTHONSTARTUP": str(planted / "startup.py"),
        "PYTHONUSERBASE": str(planted),
        "LD_PRELOAD": str(planted / "missing.so"),
    }
    with running_server("--backend", "sandbox") as server, server.client() as client:
        sid = open_session(client, env=env)["id"]
        for _ in range(2):
            ran = client.post(
                f"/v1/sessions/{sid}/executions",
                json={"code": "import os; print(os.environ['PYTHONPATH'], os.environ['LD_PRELOAD'])"},
            )
            assert ran.status_code == 200, ran.text
            assert ran.json()["result"]["stdout"].split() == [env["PYTHONPATH"], env["LD_PRELOAD"]]
        assert client.post(f"/v1/sessions/{sid}/reset").status_code == 200
        assert client.post(f"/v1/sessions/{sid}/executions", json={"code": "print(3)"}).status_code == 200
        assert client.delete(f"/v1/sessions/{sid}").status_code == 200
    assert sorted(p.name for p in planted.iterdir() if p.name.startswith("ran-")) == []
