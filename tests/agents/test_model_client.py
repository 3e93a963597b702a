"""The OpenAI-compatible model client against a local server that speaks the
chat-completions protocol (tests/fake_llm.py)."""

from __future__ import annotations

import pytest
from fake_llm import FakeModel

from execbox import ConfigurationError
from execbox.agents import ModelClient, ModelError, Usage, register_price
from execbox.agents._usage import PRICES, price_of

SCHEMA = {
    "type": "object",
    "properties": {"retry": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["retry", "reason"],
}


def test_create_sends_the_conversation_and_counts_usage():
    with FakeModel([{"content": "hello", "prompt_tokens": 12, "completion_tokens": 3}]) as server:
        client = ModelClient("gpt-4o-mini", base_url=server.base_url, api_key="sk-given", temperature=0.2)
        reply = client.create([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert reply.content == "hello"
    assert server.requests[0]["messages"][1] == {"role": "user", "content": "hi"}
    assert server.requests[0]["temperature"] == 0.2
    assert server.authorization == ["Bearer sk-given"]
    assert reply.usage == Usage(12, 3, (12 * 0.15 + 3 * 0.60) / 1e6)
    assert client.usage == reply.usage


def test_the_key_comes_from_the_named_variable(monkeypatch):
    monkeypatch.setenv("MY_KEY", "from-env")
    with FakeModel(["ok"]) as server:
        ModelClient("m", base_url=server.base_url, api_key_env="MY_KEY").create(
            [{"role": "user", "content": "x"}]
        )
    assert server.authorization == ["Bearer from-env"]


def test_openai_without_a_key_says_what_to_set(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="set OPENAI_API_KEY"):
        ModelClient("gpt-4o")


def test_streaming_yields_chunks_then_the_reply_with_usage():
    text = "Here is the code you asked for, in several pieces."
    with FakeModel([{"content": text, "reasoning_content": "think first"}]) as server:
        client = ModelClient("local-model", base_url=server.base_url)
        pieces = list(client.stream([{"role": "user", "content": "go"}]))
    chunks, final = pieces[:-1], pieces[-1]
    assert len(chunks) > 3 and all(isinstance(c, str) for c in chunks)
    assert "".join(chunks) == text == final.content
    assert final.thought == "think first"
    assert final.usage.completion_tokens == len(text.split())
    assert final.usage.cost is None  # no price for local-model
    assert server.requests[0]["stream"] is True


def test_thoughts_are_kept_apart_from_the_answer():
    with FakeModel(
        ["<think>count the letters</think>The answer is 3.", {"content": "ok", "reasoning_content": "r"}]
    ) as server:
        client = ModelClient("m", base_url=server.base_url)
        first = client.create([{"role": "user", "content": "?"}])
        second = client.create([{"role": "user", "content": "?"}])
    assert (first.content, first.thought) == ("The answer is 3.", "count the letters")
    assert (second.content, second.thought) == ("ok", "r")


def test_structured_output_uses_the_json_schema_response_format():
    with FakeModel(['{"retry": true, "reason": "typo"}']) as server:
        client = ModelClient("m", base_url=server.base_url)
        assert client.create_json([{"role": "user", "content": "?"}], SCHEMA) == {
            "retry": True,
            "reason": "typo",
        }
    asked = server.requests[0]["response_format"]
    assert asked["type"] == "json_schema" and asked["json_schema"]["schema"] == SCHEMA
    assert client.structured_output is True


def test_a_server_without_structured_output_gets_the_schema_in_the_prompt():
    answer = 'Sure!\n```json\n{"retry": false, "reason": "the data file is missing"}\n```'
    with FakeModel(
        [{"content": answer, "reject_response_format": True}, 'Here: {"retry": true, "reason": "x"}']
    ) as server:
        client = ModelClient("m", base_url=server.base_url)
        first = client.create_json([{"role": "user", "content": "?"}], SCHEMA)
        second = client.create_json([{"role": "user", "content": "?"}], SCHEMA)
    assert first == {"retry": False, "reason": "the data file is missing"}
    assert second == {"retry": True, "reason": "x"}
    assert client.structured_output is False
    # refused once with the format, then asked plainly with the schema in the last message; remembered after
    assert [("response_format" in r) for r in server.requests] == [True, False, False]
    assert '"required": ["retry", "reason"]' in server.requests[1]["messages"][-1]["content"]


def test_a_reply_without_json_is_a_model_error():
    with FakeModel([{"content": "I would rather not.", "reject_response_format": True}]) as server:
        client = ModelClient("m", base_url=server.base_url)
        with pytest.raises(ModelError, match="no JSON object with retry, reason"):
            client.create_json([{"role": "user", "content": "?"}], SCHEMA)


@pytest.mark.parametrize(
    "status, message",
    [
        (401, "refused the API key"),
        (404, "has no model 'm'"),
        (400, "answered 400: bad things"),
    ],
)
def test_server_errors_are_translated(status, message):
    with FakeModel([{"status": status, "error": "bad things"}]) as server:
        client = ModelClient("m", base_url=server.base_url, api_key="k", max_retries=0)
        with pytest.raises(ModelError, match=message):
            client.create([{"role": "user", "content": "?"}])


def test_an_unreachable_server_names_the_address():
    client = ModelClient("m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=5)
    with pytest.raises(ModelError, match=r"cannot reach the model server at http://127.0.0.1:9/v1"):
        client.create([{"role": "user", "content": "?"}])


def test_prices_can_be_extended_and_match_dated_names(monkeypatch):
    monkeypatch.setattr("execbox.agents._usage.PRICES", dict(PRICES))
    assert price_of("gpt-4o-2024-08-06") == PRICES["gpt-4o"]
    assert price_of("llama3") is None
    register_price("llama*", 0, 0)
    assert price_of("llama3:8b") == (0.0, 0.0)
    assert Usage.priced("my-model", 1000, 1000, {"my-model": (1.0, 2.0)}).cost == pytest.approx(0.003)


def test_config_round_trip_keeps_no_key():
    client = ModelClient(
        "m", base_url="http://127.0.0.1:1/v1", api_key="secret", temperature=0.5, prices={"m": (1.0, 2.0)}
    )
    config = client.to_config()
    assert "secret" not in str(config)
    again = ModelClient.from_config(config, api_key="other")
    assert again.to_config() == config
