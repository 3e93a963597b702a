"""``_docker_engine``: the one place the Docker SDK's exceptions become
execbox's. The SDK is real; the engine is a small HTTP server on a unix
socket (a fake at the protocol boundary) where a real engine cannot be made
to refuse on demand, and the real engine where it can."""

from __future__ import annotations

import json
import socketserver
import subprocess
import threading
import warnings
from http.server import BaseHTTPRequestHandler

import pytest

pytest.importorskip("docker")

import docker

from execbox import BackendUnavailableError, CodeBlock, DockerExecutor, ImageMissingError
from execbox._docker_engine import engine_errors, kill_container
from tests.conftest import require_docker


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def engine(tmp_path):
    """A client of a fake engine; ``engine.answers[(method, path)] = (status, message)``."""
    answers: dict[tuple[str, str], tuple[int, str]] = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            path = self.path.split("?", 1)[0].split("/", 2)[-1]  # without the /v1.41 prefix
            status, message = answers.get((self.command, "/" + path), (404, "page not found"))
            body = json.dumps({"message": message} if status >= 400 else {}).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_DELETE = _answer

        def address_string(self) -> str:
            return "fake-engine"

        def log_message(self, *args: object) -> None:
            pass

    path = str(tmp_path / "engine.sock")
    server = _Server(path, Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = docker.DockerClient(base_url=f"unix://{path}", version="1.41", timeout=5)
    client.answers = answers
    yield client
    client.close()
    server.shutdown()
    server.server_close()


def test_a_kill_the_engine_refuses_is_a_warning_not_a_raw_api_error(engine):
    # what escaped DockerExecutor.close() as docker.errors.APIError before
    engine.answers[("POST", "/containers/abc123/kill")] = (
        500,
        "tried to kill container, but did not receive an exit event",
    )
    with pytest.warns(
        UserWarning,
        match=r"abc123 could not be killed .*did not receive an exit event.*"
        r"docker rm -f abc123",
    ):
        kill_container(engine, "abc123")


@pytest.mark.parametrize(
    "status, message", [(404, "No such container: abc123"), (409, "Container abc123 is not running")]
)
def test_killing_a_container_gone_or_stopped_is_quiet(engine, status, message):
    engine.answers[("POST", "/containers/abc123/kill")] = (status, message)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kill_container(engine, "abc123")


def test_an_engine_that_does_not_answer_names_where_it_was_looked_for(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/nothing.sock")
    client = docker.DockerClient(base_url=f"unix://{tmp_path}/nothing.sock", version="1.41", timeout=5)
    with pytest.raises(
        BackendUnavailableError, match=r"not reachable at unix://.*nothing\.sock.*DOCKER_HOST"
    ):
        with engine_errors("listing containers"):
            client.api.containers()
    with pytest.warns(UserWarning, match="could not be killed"):
        kill_container(client, "abc123")


def test_refusals_become_the_callers_error(engine):
    engine.answers[("GET", "/containers/json")] = (500, "the engine is unwell")
    with pytest.raises(BackendUnavailableError, match="listing containers: the engine is unwell"):
        with engine_errors("listing containers"):
            engine.api.containers()

    class Gone(Exception):
        pass

    engine.answers[("POST", "/exec/e1/start")] = (409, "Container abc123 is not running")
    with pytest.raises(Gone, match="is not running"):
        with engine_errors("starting the block", gone=Gone):
            engine.api.exec_start("e1")


def test_a_missing_image_is_image_missing_error(engine):
    engine.answers[("GET", "/images/execbox/nothing:1/json")] = (404, "No such image: execbox/nothing:1")
    with pytest.raises(ImageMissingError, match="execbox images build") as caught:
        with engine_errors("starting", image="execbox/nothing:1"):
            engine.api.inspect_image("execbox/nothing:1")
    assert caught.value.image == "execbox/nothing:1"
    assert isinstance(caught.value, BackendUnavailableError) and caught.value.backend == "docker"


def test_close_after_the_container_was_removed_behind_its_back(tmp_path):
    require_docker()
    ex = DockerExecutor(workspace=tmp_path / "ws")
    try:
        assert ex.run(CodeBlock("python", "print('hi')")).exit_code == 0
        subprocess.run(["docker", "rm", "-f", ex.container_id], check=True, capture_output=True, timeout=60)
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ex.close()  # nothing to stop: no error, no warning
