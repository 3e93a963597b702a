"""``gpus`` in a request, on a host without a GPU: the server allows only
what ``--allow-gpus`` names, only on the backends that take GPUs, and a
sandbox asked for one says which driver is missing. (The jail's side:
tests/backends/test_gpus.py; CUDA itself: scripts/gpu-check.sh.)"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from execbox._gpus import host_gpus
from tests.server._http import Server, error_of, running_server


@pytest.fixture(scope="module")
def gpu_server() -> Iterator[Server]:
    with running_server("--backend", "sandbox", "--backends", "local", "--allow-gpus", "0") as running:
        yield running


@pytest.mark.parametrize(
    ("asked", "says"),
    [
        ({"gpus": 1}, "gpus 1 is past what this server allows: 0 (--allow-gpus)"),
        ({"gpus": "all"}, "gpus all is past what this server allows"),
        ({"gpus": 0, "backend": "local"}, "gpus is for the sandbox and docker backends, not 'local'"),
        ({"gpus": "gpu0"}, "neither a GPU index"),
    ],
)
def test_gpus_past_the_servers_allowance_are_400(gpu_server, asked, says):
    with gpu_server.client() as client:
        answer = client.post("/v1/run", json={"code": "print(1)", **asked})
        error_of(answer, 400, "bad_request")
        assert says in answer.json()["error"]["message"]
        opened = client.post("/v1/sessions", json=asked)
        error_of(opened, 400, "bad_request")


def test_a_gpu_the_host_has_not_is_told_with_the_driver_to_install(gpu_server):
    if host_gpus():
        pytest.skip("this host has a GPU: scripts/gpu-check.sh runs blocks on it")
    with gpu_server.client() as client:
        info = client.get("/v1/info").json()
        answer = client.post("/v1/run", json={"code": "print(1)", "gpus": 0})
        plain = client.post("/v1/run", json={"code": "print(1)"})
    assert info["limits"]["maximum"]["gpus"] == ["0"]
    assert answer.status_code >= 500 and "install the NVIDIA driver" in answer.json()["error"]["message"]
    assert plain.status_code == 200 and plain.json()["stdout"] == "1\n"  # the GPU-less executor is apart


def test_a_server_without_allow_gpus_refuses_them(client):
    error_of(client.post("/v1/run", json={"code": "1", "gpus": 0}), 400, "bad_request")
    assert client.get("/v1/info").json()["limits"]["maximum"]["gpus"] == []


def test_the_client_and_the_remote_executor_ask_for_gpus(gpu_server):
    from execbox import ConfigurationError, ServiceError
    from execbox.backends.remote import RemoteExecutor
    from execbox.client import Client

    with Client(gpu_server.url, token=gpu_server.token) as client:
        with pytest.raises(ServiceError, match=r"gpus 1 is past what this server allows"):
            client.run("print(1)", gpus=1)
        with pytest.raises(ConfigurationError, match="neither a GPU index"):
            client.run("print(1)", gpus="first")
        with pytest.raises(ServiceError, match=r"gpus 1 is past"):
            client.session(gpus=[1])
    remote = RemoteExecutor(gpu_server.url, token=gpu_server.token, gpus=1)
    try:
        with pytest.raises(ServiceError, match=r"gpus 1 is past"):
            remote.start()
    finally:
        remote.close()
