"""``POST /run_code``, SandboxFusion's API, against a real server on
loopback: driven by SandboxFusion's own client (``sandbox_fusion``, which
sends no token: the server runs with ``--no-token``, as on loopback it may)
and by the exact body veRL's reward code posts, checked on the fields veRL
reads."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator

import httpx
import pytest

from tests.server._http import Server, error_of, running_server

sandbox_fusion = pytest.importorskip("sandbox_fusion")
RunCodeRequest = sandbox_fusion.RunCodeRequest

CPP_ECHO_SUM = """#include <iostream>
int main() { long a, b; std::cin >> a >> b; std::cout << a + b << std::endl; return 0; }
"""
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed")


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with running_server(
        "--backend", "local", "--no-token", "--max-timeout", "20", "--max-upload-mb", "1"
    ) as running:
        yield running


def run(server: Server, **fields):  # type: ignore[no-untyped-def]
    """SandboxFusion's client against the server (one attempt: no retries hide a failure)."""
    return sandbox_fusion.run_code(RunCodeRequest(**fields), endpoint=server.url, max_attempts=1)


def test_python_success(server: Server) -> None:
    done = run(server, code="print(6 * 7)", language="python")
    assert done.status == "Success" and done.message == "" and done.compile_result is None
    assert done.run_result.status == "Finished" and done.run_result.return_code == 0
    assert done.run_result.stdout == "42\n" and done.run_result.stderr == ""
    assert done.run_result.execution_time > 0 and done.files == {} and done.executor_pod_name is None


@needs_gxx
def test_cpp_reads_stdin_and_reports_its_compile(server: Server) -> None:
    done = run(server, code=CPP_ECHO_SUM, language="cpp", stdin="40 2\n", compile_timeout=20)
    assert done.status == "Success", done
    assert done.compile_result.status == "Finished" and done.compile_result.return_code == 0
    assert done.compile_result.execution_time > 0  # the compile's own time (veRL's compile_duration)
    assert done.run_result.status == "Finished" and done.run_result.stdout == "42\n"


@needs_gxx
def test_compile_error_fills_compile_result_only(server: Server) -> None:
    done = run(server, code="int main() { return nope; }", language="cpp", compile_timeout=20)
    assert done.status == "Failed" and done.run_result is None
    assert done.compile_result.status == "Finished" and done.compile_result.return_code != 0
    assert "nope" in done.compile_result.stderr


@needs_gxx
def test_compile_timeout_is_time_limit_exceeded(server: Server) -> None:
    done = run(server, code=CPP_ECHO_SUM, language="cpp", compile_timeout=0.01)
    assert done.status == "Failed" and done.run_result is None
    assert done.compile_result.status == "TimeLimitExceeded"


def test_timeout_is_time_limit_exceeded(server: Server) -> None:
    done = run(
        server, code="import time\nprint('hi', flush=True)\ntime.sleep(30)", language="python", run_timeout=1
    )
    assert done.status == "Failed" and done.compile_result is None
    assert done.run_result.status == "TimeLimitExceeded" and done.run_result.return_code is None
    assert done.run_result.stdout == "hi\n" and 1 <= done.run_result.execution_time < 10


def test_nonzero_exit_is_failed_and_finished(server: Server) -> None:
    done = run(server, code="import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)", language="python")
    assert done.status == "Failed" and done.message == ""
    assert done.run_result.status == "Finished" and done.run_result.return_code == 3
    assert done.run_result.stderr == "oops\n"


def test_files_in_and_fetched_out_as_base64(server: Server) -> None:
    binary = bytes(range(256))
    code = (
        "data = open('in/data.bin', 'rb').read()\n"
        "open('out.bin', 'wb').write(data[::-1])\n"
        "open('out.txt', 'w').write('héllo')\n"
        "print(len(data))"
    )
    done = run(
        server,
        code=code,
        language="python",
        files={"in/data.bin": base64.b64encode(binary).decode(), "skipped.txt": None},
        fetch_files=["out.bin", "out.txt", "missing.txt", "in"],
    )
    assert done.status == "Success" and done.run_result.stdout == "256\n"
    assert set(done.files) == {"out.bin", "out.txt"}  # a missing file or a folder is left out
    assert base64.b64decode(done.files["out.bin"]) == binary[::-1]
    assert base64.b64decode(done.files["out.txt"]).decode() == "héllo"


@pytest.mark.parametrize(
    "language, code, out", [("nodejs", "console.log(6 * 7)", "42\n"), ("bash", "echo $((6 * 7))", "42\n")]
)
def test_sandbox_fusion_names_map_to_execbox(server: Server, language: str, code: str, out: str) -> None:
    if language == "nodejs" and shutil.which("node") is None:
        pytest.skip("node is not installed")
    done = run(server, code=code, language=language)
    assert done.status == "Success" and done.run_result.stdout == out


def test_unknown_language_is_a_sandbox_error(server: Server) -> None:
    # julia is one of SandboxFusion's names (its client refuses others) that execbox does not run
    with pytest.raises(Exception, match="Sandbox responded with error: language 'julia'"):
        run(server, code="println(1)", language="julia")
    with httpx.Client(base_url=server.url) as client:
        answer = client.post("/run_code", json={"code": "x", "language": "cobol"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "SandboxError" and body["run_result"] is None and body["compile_result"] is None
    assert (
        "'cobol'" in body["message"] and "python, cpp, go" in body["message"] and "nodejs" in body["message"]
    )


def test_verl_body_and_the_fields_it_reads(server: Server) -> None:
    """veRL's ``call_sandbox_api`` body (its field set) and what its ``_process_single_case`` reads."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for language, code, stdin in (
            ("python", "a, b = map(int, input().split())\nprint(a + b)", "40 2"),
            *([("cpp", CPP_ECHO_SUM, "40 2")] if shutil.which("g++") else []),
        ):
            body = {
                "compile_timeout": 10,
                "run_timeout": 10,
                "code": code,
                "stdin": stdin,
                "language": language,
                "files": {},
                "fetch_files": [],
            }
            answer = client.post(
                "/run_code",
                json=body,
                headers={"Content-Type": "application/json", "Accept": "application/json"},
            )
            assert answer.status_code == 200, answer.text
            got = answer.json()
            assert got["status"] == "Success"
            run_result = got["run_result"]
            assert run_result["status"] == "Finished" and run_result["return_code"] == 0
            assert run_result["stdout"].rstrip("\n") == "42" and run_result["stderr"] == ""
            assert isinstance(run_result["execution_time"], float)
            compile_result = got["compile_result"]
            if language == "cpp":
                assert {"status", "execution_time", "stderr", "return_code"} <= set(compile_result)
                assert compile_result["status"] == "Finished" and compile_result["return_code"] == 0
                assert (
                    isinstance(compile_result["execution_time"], float)
                    and compile_result["execution_time"] > 0
                )
            else:
                assert compile_result is None


def test_bad_requests_are_400_in_the_one_shape(server: Server) -> None:
    with httpx.Client(base_url=server.url) as client:
        for body, code, said in (
            ({"language": "python"}, "bad_request", "'code'"),
            ({"code": "1"}, "bad_request", "'language'"),
            ({"code": "1", "language": "python", "compile_timeout": 0}, "invalid_limits", "positive"),
            ({"code": "1", "language": "python", "run_timeout": "soon"}, "bad_request", "'run_timeout'"),
            ({"code": "1", "language": "python", "memory_limit_MB": 256.5}, "bad_request", "memory_limit_MB"),
            ({"code": "1", "language": "python", "files": {"a": "%%%"}}, "bad_request", "base64"),
            ({"code": "1", "language": "python", "files": {"../a": "YQ=="}}, "path_escape", "../a"),
            ({"code": "1", "language": "python", "fetch_files": [1]}, "bad_request", "fetch_files"),
        ):
            error = error_of(client.post("/run_code", json=body), 400, code)
            assert said in error["message"], (body, error)


def test_memory_limit_is_passed_on(server: Server) -> None:
    done = run(server, code="print('small')", language="python", memory_limit_MB=256)
    assert done.status == "Success" and done.run_result.stdout == "small\n"


def test_output_past_the_cap_is_failed_not_a_clean_run(server: Server) -> None:
    """A run whose output was cut cannot be a clean one: veRL reads ``Failed``
    with ``run_result.status`` ``Error`` as a runtime error (its -2), never as
    ``Success`` whose cut stdout it would compare as an answer."""
    done = run(server, code="print('x' * 2_000_000)", language="python")
    assert done.status == "Failed" and done.compile_result is None
    assert done.run_result.status == "Error" and done.run_result.return_code == 0  # its own exit code
    assert "max_output_bytes" in done.message and "1048576" in done.message
    assert done.run_result.stdout.startswith("x" * 1000) and len(done.run_result.stdout) < 1_100_000
    small = run(server, code="print('x' * 1000)", language="python")
    assert small.status == "Success" and small.run_result.status == "Finished" and small.message == ""


def test_limits_past_the_maximum_are_clamped_and_said_in_a_header(server: Server) -> None:
    """SandboxFusion refuses no limit (its model takes any number): past this
    server's maximum a limit is held to it, not a 400 veRL scores -1."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post(
            "/run_code",
            json={
                "code": "print(6 * 7)",
                "language": "python",
                "run_timeout": 900,
                "compile_timeout": 1000.5,
                "memory_limit_MB": 1 << 30,
            },
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["status"] == "Success" and answer.json()["run_result"]["stdout"] == "42\n"
        clamped = answer.headers["X-Execbox-Clamped"]
        assert "run_timeout=20 (asked 900)" in clamped and "compile_timeout=20 (asked 1000.5)" in clamped
        most = client.get("/v1/info").json()["limits"]["maximum"]["memory_mb"]
        assert f"memory_limit_MB={most} (asked {1 << 30})" in clamped
        within = client.post("/run_code", json={"code": "print(1)", "language": "python", "run_timeout": 20})
        assert within.status_code == 200 and "X-Execbox-Clamped" not in within.headers


@pytest.mark.parametrize(
    "limits",
    [
        {"run_timeout": "5", "compile_timeout": "7.5", "memory_limit_MB": "256"},
        {"run_timeout": 5.5, "compile_timeout": 7, "memory_limit_MB": 256.0},
    ],
)
def test_limits_as_numeric_strings_or_floats_are_taken(server: Server, limits: dict) -> None:  # type: ignore[type-arg]
    """As SandboxFusion's pydantic model takes them: a number in a string, a
    whole float for the megabytes."""
    with httpx.Client(base_url=server.url, timeout=60) as client:
        answer = client.post("/run_code", json={"code": "print(6 * 7)", "language": "python", **limits})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "Success" and answer.json()["run_result"]["stdout"] == "42\n"
    assert "X-Execbox-Clamped" not in answer.headers
