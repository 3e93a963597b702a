"""``POST /v1/judge`` on a real server on loopback: verdicts per case, a
compiled language built once for its cases, bad requests named."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.server._http import running_server

ADD_C = '#include <stdio.h>\nint main(){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n",a+b);}'


def test_verdicts_per_case(client) -> None:
    cases = [
        {"stdin": "1 2", "expected_stdout": "3\n", "name": "small"},
        {"stdin": "5 5", "expected_stdout": "11"},
        {"stdin": "2 2", "expected_stdout": "4"},
    ]
    asked = {"code": ADD_C, "language": "c", "cases": cases, "stop_on_failure": False, "backend": "sandbox"}
    answer = client.post("/v1/judge", json=asked)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["verdict"] == "wrong_answer" and body["passed"] == 2 and body["total"] == 3
    verdicts = [case["verdict"] for case in body["cases"]]
    assert verdicts == ["accepted", "wrong_answer", "accepted"]
    assert "expected '11', got '10'" in body["cases"][1]["message"]
    assert body["cases"][0]["name"] == "small"


def test_compile_error_and_time_limit(client) -> None:
    broken = client.post(
        "/v1/judge", json={"code": "int main(){ return x; }", "language": "c", "cases": [{}]}
    )
    assert broken.json()["verdict"] == "compile_error"
    assert "undeclared" in broken.json()["compile_output"]
    slow = client.post(
        "/v1/judge",
        json={
            "code": "while True: pass",
            "language": "python",
            "cases": [{}, {}],
            "limits": {"timeout_s": 1},
        },
    )
    body = slow.json()
    assert body["verdict"] == "time_limit"
    assert [c["verdict"] for c in body["cases"]] == ["time_limit", "skipped"]


@pytest.mark.parametrize(
    ("body", "named"),
    [
        ({"code": "print(1)", "cases": [{}]}, "language"),
        ({"code": "print(1)", "language": "python", "cases": []}, "cases"),
        ({"code": "print(1)", "language": "python", "cases": [{"stdin": 3}]}, "stdin"),
        ({"code": "print(1)", "language": "python", "cases": [{}], "compare": "fuzzy"}, "compare"),
        ({"code": "x", "language": "cobol", "cases": [{}]}, "cobol"),
    ],
)
def test_bad_requests_are_named(client, body: dict, named: str) -> None:
    answer = client.post("/v1/judge", json=body)
    assert answer.status_code == 400, answer.text
    assert named in answer.json()["error"]["message"]


def test_a_client_that_goes_away_cancels_its_judge_and_frees_its_slot(tmp_path) -> None:
    """Security issue 39: a judge kept its slot for all its cases after its
    client left (up to 1,000 x 600 s). A server of one slot and no line:
    while a judge of 50 slow cases runs, another request is refused (429);
    its client closes the connection mid-case; the case's process is
    killed, no further case starts, and the slot serves the next request."""
    pids = tmp_path / "pids"
    code = f"import os, time\nopen({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\ntime.sleep(60)\n"
    body = json.dumps(
        {
            "code": code,
            "language": "python",
            "cases": [{"expected_stdout": ""}] * 50,
            "stop_on_failure": False,
            "limits": {"timeout_s": 120},
        }
    ).encode()

    def alive(pid: int) -> bool:
        try:
            with open(f"/proc/{pid}/status") as status:
                return "zombie" not in status.read()
        except OSError:
            return False

    def until(what: Callable[[], Any], deadline_s: float = 60.0) -> Any:
        end = time.monotonic() + deadline_s
        while not (found := what()):
            assert time.monotonic() < end, f"not within {deadline_s:g} s"
            time.sleep(0.1)
        return found

    with running_server(
        "--backend", "local", "--max-concurrency", "1", "--max-queue", "0", "--max-timeout", "600"
    ) as server:
        port = int(server.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as judge:
            judge.sendall(
                b"POST /v1/judge HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                + f"Authorization: Bearer {server.token}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            [first] = until(lambda: pids.exists() and pids.read_text().split())
            with server.client() as client:
                refused = client.post("/v1/run", json={"code": "print(1)"})
                assert refused.status_code == 429, refused.text  # the judge holds the one slot
        # the judge's client has gone
        until(lambda: not alive(int(first)))
        with server.client() as client:
            until(lambda: client.get("/v1/info").json()["load"]["running"] == 0)
            served = client.post("/v1/run", json={"code": "print('served')"})
            assert served.status_code == 200 and served.json()["output"] == "served\n", served.text
        assert pids.read_text().split() == [first], "a case started after the client left"


def test_a_program_cannot_read_its_compiled_checkers_answer(client) -> None:
    """Issue 39: through /v1/judge a compiled checker was built in the
    program's workspace (``.execbox/build/<key>/main.c``), where case 2 read
    the answer embedded in it."""
    answer = f"answer-{time.monotonic_ns():016x}"[:23]
    checker = (
        "#include <stdio.h>\n#include <string.h>\n"
        f'static const char ANSWER[] = "{answer}";\n'
        "int main(void) { static char in[1 << 16]; size_t n = fread(in, 1, sizeof in - 1, stdin);\n"
        "  in[n] = 0; return strstr(in, ANSWER) ? 0 : 1; }\n"
    )
    program = (
        "import os, re\nfound = set()\n"
        "for top, dirs, files in os.walk('.'):\n"
        "    for name in files:\n"
        "        try:\n"
        "            found.update(re.findall(rb'answer-[0-9a-f]+', open(os.path.join(top, name), 'rb').read()))\n"
        "        except OSError:\n"
        "            pass\n"
        "print(b' '.join(sorted(found)).decode() or 'nothing found')\n"
    )
    asked = {
        "code": program,
        "language": "python",
        "cases": [{"checker": {"code": checker, "language": "c"}}] * 2,
        "stop_on_failure": False,
        "backend": "sandbox",
    }
    reply = client.post("/v1/judge", json=asked)
    assert reply.status_code == 200, reply.text
    cases = reply.json()["cases"]
    assert [c["verdict"] for c in cases] == ["wrong_answer"] * 2, [(c["verdict"], c["stdout"]) for c in cases]
    assert not any(answer in c["stdout"] for c in cases)
