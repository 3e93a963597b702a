"""``execbox serve`` and ``execbox playground`` as a person starts them:
a port in use, a wrong token, the API's description the banner points at,
the playground on another address, and a clean SIGTERM."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx

from tests.server._http import SRC, error_of, free_port, running_server


def _execbox(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": SRC}
    env.pop("EXECBOX_TOKEN", None)
    return subprocess.Popen(
        [sys.executable, "-m", "execbox.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_port_in_use_is_one_line_naming_port_and_exit_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for command in (["serve", "--token", "t"], ["playground", "--no-browser"]):
            proc = _execbox(*command, "--port", str(port))
            _, err = proc.communicate(timeout=60)
            assert proc.returncode == 2, err
            assert len(err.strip().splitlines()) == 1, err  # no uvicorn log line, no traceback
            assert err.startswith(f"execbox: error: cannot listen on 127.0.0.1 port {port}: "), err
            assert "--port" in err and "Address already in use" in err


def test_a_wrong_token_is_told_it_is_wrong_and_none_that_one_is_required():
    with running_server("--backend", "local", token="s3cret") as server:
        with httpx.Client(base_url=server.url, timeout=10) as bare:
            wrong = error_of(
                bare.get("/v1/info", headers={"Authorization": "Bearer nope"}), 401, "unauthorized"
            )
            assert "not this server's" in wrong["message"] and "required" not in wrong["message"]
            missing = error_of(bare.get("/v1/info"), 401, "unauthorized")
            assert "required" in missing["message"]


def test_the_api_description_the_banner_points_at_needs_no_token(tmp_path):
    log = tmp_path / "serve.log"
    with running_server("--backend", "local", token="s3cret", log=log) as server:
        assert "API at /openapi.json" in server.log_text()
        with httpx.Client(base_url=server.url, timeout=10) as bare:
            described = bare.get("/openapi.json")
            assert described.status_code == 200 and described.json()["openapi"].startswith("3.")
            assert "s3cret" not in described.text
            error_of(bare.post("/openapi.json"), 401, "unauthorized")  # GET only, as the page's files
            error_of(bare.get("/v1/info"), 401, "unauthorized")  # the API itself is not


def test_the_playground_listens_on_the_host_it_is_given():
    port = free_port()
    proc = _execbox(
        "playground", "--no-browser", "--backend", "local", "--host", "127.0.0.2", "--port", str(port)
    )
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the link, once the socket is bound
        link = re.search(r"http://127\.0\.0\.2:(\d+)/\?token=(\S+)", first)
        assert link and int(link[1]) == port, first
        deadline = time.monotonic() + 30
        while True:  # bound, then listening once the app has started
            try:
                page = httpx.get(f"http://127.0.0.2:{port}/", timeout=5)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.2)
        assert page.status_code == 200
        info = httpx.get(
            f"http://127.0.0.2:{port}/v1/info", headers={"Authorization": f"Bearer {link[2]}"}, timeout=10
        )
        assert info.status_code == 200, info.text
        with socket.socket() as probe:  # not on 127.0.0.1
            assert probe.connect_ex(("127.0.0.1", port)) != 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_sigterm_leaves_no_semaphore_and_prints_no_warning(tmp_path):
    log = tmp_path / "serve.log"
    with running_server("--backend", "local", log=log) as server:
        with server.client() as client:
            assert client.post("/v1/run", json={"code": "print(6 * 7)"}).json()["stdout"] == "42\n"
        maps = open(f"/proc/{server.proc.pid}/maps").read()
        # a named POSIX semaphore is a mapped /dev/shm/sem.* file: SIGTERM would leak it (uvicorn
        # re-raises the signal after its shutdown, so no atexit unlinks it)
        assert "/dev/shm/sem." not in maps
        status = server.stop(signal.SIGTERM)
    assert status in (0, -signal.SIGTERM), status
    said = log.read_text(errors="replace")
    assert "leaked semaphore" not in said and "resource_tracker" not in said, said
