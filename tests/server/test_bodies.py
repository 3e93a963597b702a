"""The request bodies as typed models: the OpenAPI document's schemas are
the models' own, and a body the model refuses is a 400 in the one error
shape naming the field and what it must be (against a real server)."""

from __future__ import annotations

import json

import pytest

from execbox._judge import COMPARE_MODES
from execbox._models import Limits
from execbox.server import ServerConfig
from execbox.server._answer_models import ANSWER_MODELS
from execbox.server._bodies import REQUEST_MODELS, JudgeRequest, RunRequest, checked
from execbox.server._bodies import Limits as LimitsModel
from execbox.server._errors import ApiError
from execbox.server._openapi import BODIES, openapi
from execbox.server._wire import run_request
from tests.server._http import error_of

REF = "#/components/schemas/{model}"


def _own(model) -> dict:
    schema = model.model_json_schema(ref_template=REF)
    schema.pop("$defs", None)
    return schema


def test_every_json_body_of_the_document_is_a_models_schema():
    document = openapi()
    components = document["components"]["schemas"]
    with_json_body = {
        (path, method)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    }
    assert with_json_body == set(BODIES)
    for (path, method), model in BODIES.items():
        body = document["paths"][path][method]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": REF.format(model=model.__name__)}, (path, method)
    for model in (*REQUEST_MODELS, *ANSWER_MODELS):
        assert components[model.__name__] == _own(model), model.__name__


def test_the_models_nested_schemas_are_components_too():
    components = openapi()["components"]["schemas"]
    text = json.dumps(components)
    refs = {part.split('"')[0] for part in text.split('"$ref": "#/components/schemas/')[1:]}
    assert refs and refs <= set(components), refs - set(components)
    assert components["Limits"]["additionalProperties"] is False  # unknown limits are refused


def test_judge_compare_modes_are_the_libraries():
    assert JudgeRequest.model_json_schema()["properties"]["compare"]["anyOf"][0]["enum"] == sorted(
        COMPARE_MODES, key=["lines", "exact", "whitespace", "float"].index
    )


@pytest.mark.parametrize(
    ("body", "code", "says"),
    [
        ({"code": 3}, "bad_request", "'code' must be a string (got 3)"),
        ({"blocks": [{"code": "1"}, {"language": "sh"}]}, "bad_request", "'blocks[1].code' is required"),
        ({"code": "1", "fetch_files": ["a", 2]}, "bad_request", "'fetch_files[1]' must be a string"),
        ({"code": "1", "files": {"a": {"content": "x", "encoding": "hex"}}}, "bad_request", "encoding"),
        ({"code": "1", "files": {"a": 3}}, "bad_request", "'files.a' must be an object or a string (got 3)"),
        (
            {"code": "1", "limits": {"timeout_s": "5"}},
            "invalid_limits",
            "'limits.timeout_s' must be a number",
        ),
        (
            {"code": "1", "limits": {"timeout_s": True}},
            "invalid_limits",
            "'limits.timeout_s' must be a number",
        ),
        ({"code": "1", "limits": {"wall": 1}}, "invalid_limits", "'limits.wall' is not a field here: use "),
        ({"code": "1", "gpus": 1.5}, "bad_request", "'gpus'"),
    ],
)
def test_a_run_body_the_model_refuses_names_the_field(body, code, says):
    with pytest.raises(ApiError) as refused:
        run_request(body, ServerConfig(backend="local"))
    assert refused.value.status == 400 and refused.value.code == code
    assert says in refused.value.message, refused.value.message


def test_the_strict_rules_of_the_hand_written_checks_are_kept():
    made = checked(RunRequest, {"code": "1", "language": None, "unknown": 1, "limits": {"timeout_s": 2}})
    assert made.language is None and made.limits is not None and made.limits.timeout_s == 2.0
    for wrong in ({"code": "1", "stdin": 1}, {"code": "1", "limits": {"memory_mb": "64"}}, [1]):
        with pytest.raises(ApiError):
            checked(RunRequest, wrong)
    with pytest.raises(ApiError, match=r"'cases\[0\].expected' is not a field here: use checker"):
        checked(JudgeRequest, {"code": "1", "language": "python", "cases": [{"expected": "1"}]})
    with pytest.raises(ApiError, match="'cases' has 1001 items: at most 1000"):
        checked(JudgeRequest, {"code": "1", "language": "python", "cases": [{}] * 1001})


@pytest.mark.parametrize(
    ("route", "body", "code", "says"),
    [
        (
            "/v1/run",
            {"code": "1", "limits": {"cpus": "2"}},
            "invalid_limits",
            "'limits.cpus' must be a number",
        ),
        (
            "/v1/batch",
            {"requests": [{"code": "1"}], "max_concurrency": "2"},
            "bad_request",
            "max_concurrency",
        ),
        ("/v1/batch", {"requests": 3}, "bad_request", "'requests' must be a non-empty list"),
        ("/v1/judge", {"code": "1", "language": "python"}, "bad_request", "'cases' is required"),
        ("/v1/sessions", {"env": {"A": 1}}, "bad_request", "'env.A' must be a string"),
        ("/v1/sessions", {"execution_policies": {"sh": "run"}}, "bad_request", "'execution_policies.sh'"),
        ("/v1/extract", {"text": None}, "bad_request", "'text' must be a string"),
        ("/run_code", {"code": "1", "language": "python", "stdin": 5}, "bad_request", "'stdin'"),
    ],
)
def test_each_json_route_answers_the_models_400(client, route, body, code, says):
    error = error_of(client.post(route, json=body), 400, code)
    assert says in error["message"], error["message"]


def test_a_session_execution_body_is_checked_by_its_model(client):
    made = client.post("/v1/sessions", json={}).json()
    try:
        headers = {"X-Execbox-Session-Key": made["key"]}
        url = f"/v1/sessions/{made['id']}/executions"
        error = error_of(client.post(url, json={"code": ["print(1)"]}, headers=headers), 400, "bad_request")
        assert "'code' must be a string" in error["message"]
        assert client.post(url, json={"code": "print(1)"}, headers=headers).json()["status"] == "completed"
    finally:
        client.delete(f"/v1/sessions/{made['id']}", headers={"X-Execbox-Session-Key": made["key"]})


def test_the_limits_model_takes_every_field_of_limits():
    # the client sends a Limits whole (client/_wire.py limits_body): the model must take each field
    whole = {name: getattr(Limits(), name) for name in Limits.__dataclass_fields__}
    assert set(LimitsModel.model_fields) == set(whole)
    assert run_request({"code": "1", "limits": whole}, ServerConfig(backend="local")).limits == Limits()
