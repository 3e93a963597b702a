"""AnthropicClient against the local server speaking the Messages API:
translation of the chat-completions context, structured output, streaming,
errors, usage and config."""

from __future__ import annotations

import pytest
from fake_anthropic import FakeAnthropic

from execbox import ConfigurationError
from execbox.agents import AnthropicClient, ModelClient, ModelError, model_client
from execbox.agents._providers import model_from_config


def client(fake: FakeAnthropic, **options) -> AnthropicClient:
    return AnthropicClient("claude-haiku-4-5", base_url=fake.base_url, api_key="secret", **options)


def test_context_translation_system_alternation_and_tool_results():
    context = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "first"},
        {"role": "user", "content": "second"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}},
                {"id": "t2", "type": "function", "function": {"name": "f", "arguments": '{"x": 2}'}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "1"},
        {"role": "tool", "tool_call_id": "t2", "content": "2"},
        {"role": "user", "content": "and now?"},
    ]
    with FakeAnthropic(["3"]) as fake:
        reply = client(fake).create(context)
        sent = fake.requests[0]
    assert reply.content == "3" and "secret" in fake.api_keys[0]
    assert sent["system"] == "Be brief." and sent["max_tokens"] == 4096
    assert [t["role"] for t in sent["messages"]] == ["user", "assistant", "user"]
    assert [b["type"] for b in sent["messages"][2]["content"]] == ["tool_result", "tool_result", "text"]
    assert sent["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "t1",
        "name": "f",
        "input": {"x": 1},
    }


def test_structured_output_is_a_forced_tool_call():
    with FakeAnthropic(
        [{"tool_calls": [{"name": "Decision", "arguments": {"retry": True, "reason": "typo"}}]}]
    ) as fake:
        decision = client(fake).create_json(
            [{"role": "user", "content": "retry?"}],
            {"title": "Decision", "type": "object", "properties": {"retry": {"type": "boolean"}}},
        )
        sent = fake.requests[0]
    assert decision == {"retry": True, "reason": "typo"}
    assert sent["tool_choice"] == {"type": "tool", "name": "Decision"}


def test_streaming_usage_and_cost():
    with FakeAnthropic([{"content": "streamed answer", "input_tokens": 1000, "output_tokens": 200}]) as fake:
        model = client(fake)
        pieces = list(model.stream([{"role": "user", "content": "hi"}]))
    assert "".join(p for p in pieces if isinstance(p, str)) == "streamed answer"
    assert pieces[-1].usage.prompt_tokens == 1000 and pieces[-1].usage.completion_tokens == 200
    assert model.usage.cost == pytest.approx((1000 * 1.0 + 200 * 5.0) / 1_000_000)  # claude-haiku-4-5's price


def test_errors_name_what_to_change(monkeypatch):
    with FakeAnthropic([{"status": 401, "error": "invalid x-api-key"}]) as fake:
        with pytest.raises(ModelError, match=r"refused the API key \(the api_key given\): 401"):
            client(fake, max_retries=0).create([{"role": "user", "content": "hi"}])
    with pytest.raises(ModelError, match=r"cannot reach the model server at http://127.0.0.1:9"):
        AnthropicClient("claude-x", base_url="http://127.0.0.1:9", api_key="k", max_retries=0).create(
            [{"role": "user", "content": "hi"}]
        )
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigurationError, match="set ANTHROPIC_API_KEY or pass api_key"):
        AnthropicClient("claude-x")
    with pytest.raises(ConfigurationError, match="thinking_budget"):
        AnthropicClient("claude-x", api_key="k", thinking_budget=10)


def test_one_interface_chosen_by_provider_and_kept_in_config():
    claude = model_client("claude-haiku-4-5", api_key="k", base_url="http://127.0.0.1:9")
    gpt = model_client("gpt-4o-mini", api_key="k")
    assert isinstance(claude, AnthropicClient) and isinstance(gpt, ModelClient)
    again = model_from_config(claude.to_config(), api_key="k")
    assert isinstance(again, AnthropicClient) and again.max_tokens == 4096
    assert isinstance(model_from_config({"model": "gpt-4o-mini"}, api_key="k"), ModelClient)
    with pytest.raises(ConfigurationError, match="provider='gemini'"):
        model_client("gemini-2.0", provider="gemini")
