"""``POST /v1/judge`` on a real server on loopback: verdicts per case, a
compiled language built once for its cases, bad requests named."""

from __future__ import annotations

import pytest

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
