"""The writer/executor conversation, with and without a person in the loop,
against the scripted model server and real executors."""

from __future__ import annotations

import pytest
from fake_llm import FakeModel

import execbox
from execbox import ConfigurationError
from execbox.agents import (
    Approval,
    Conversation,
    ModelClient,
    WriterAgent,
    format_chat_result,
    writer_system_message,
)

BROKEN = "First try:\n```python\n# filename: fib.py\nprint(fib(10))\n```"
FIXED = (
    "Define it first:\n```python\n# filename: fib.py\ndef fib(n):\n    a, b = 0, 1\n"
    "    for _ in range(n):\n        a, b = b, a + b\n    return a\nprint(fib(10))\n```"
)
DONE = "fib(10) is 55. TERMINATE"


def _script(*replies):
    return FakeModel(list(replies))


def test_unattended_chat_fixes_an_error_and_ends_on_terminate(tmp_path):
    seen = []
    with _script(BROKEN, FIXED, DONE) as server, execbox.SandboxExecutor(workspace=tmp_path) as ex:
        writer = WriterAgent(ModelClient("gpt-4o-mini", base_url=server.base_url, api_key="k"))
        chat = Conversation(writer, ex, on_message=seen.append)
        result = chat.initiate_chat("Compute the 10th Fibonacci number.")
        first_prompt = server.requests[0]["messages"]
    assert [m.source for m in result.chat_history] == [
        "user",
        "writer",
        "executor",
        "writer",
        "executor",
        "writer",
    ]
    assert seen == result.chat_history
    assert result.chat_history[2].content.startswith("exitcode: 1 (execution failed)")
    assert "NameError" in result.chat_history[2].content
    assert result.chat_history[4].content == "exitcode: 0 (execution succeeded)\n55\n"
    assert (tmp_path / "fib.py").exists()
    assert result.stop_reason == "the writer said TERMINATE"
    assert result.summary == "fib(10) is 55."
    assert result.turns == 3 and len(result.executions) == 2
    assert result.cost.total_tokens > 0 and result.cost.cost > 0
    assert first_prompt[0]["role"] == "system" and "TERMINATE" in first_prompt[0]["content"]
    assert first_prompt[1] == {"role": "user", "content": "Compute the 10th Fibonacci number."}
    report = format_chat_result(result)
    assert "after 3 writer turn(s)" in report and "Summary: fib(10) is 55." in report and "$" in report


def test_max_turns_stops_the_chat():
    with _script(BROKEN, BROKEN, BROKEN) as server, execbox.LocalExecutor() as ex:
        chat = Conversation(WriterAgent(ModelClient("m", base_url=server.base_url)), ex)
        result = chat.initiate_chat("go", max_turns=2)
    assert result.turns == 2 and result.stop_reason == "max_turns=2 reached"
    assert server.remaining == 1


def test_a_person_guides_runs_and_ends_the_chat():
    typed = iter(["", "Use a loop, not recursion.", ""])
    prompts = []

    def person(prompt):
        prompts.append(prompt)
        return next(typed)

    with _script(BROKEN, FIXED, DONE) as server, execbox.LocalExecutor() as ex:
        chat = Conversation(
            WriterAgent(ModelClient("m", base_url=server.base_url)),
            ex,
            human_input_mode="ALWAYS",
            human_input=person,
        )
        result = chat.initiate_chat("fib(10)?")
        last_prompt = server.requests[-1]["messages"]
    assert result.human_input == ["", "Use a loop, not recursion.", ""]
    # Enter ran the broken code; the guidance went to the writer instead of running FIXED; Enter at DONE ended it
    assert [m.source for m in result.chat_history] == [
        "user",
        "writer",
        "executor",
        "writer",
        "user",
        "writer",
    ]
    assert result.chat_history[4].content == "Use a loop, not recursion."
    assert {"role": "user", "content": "Use a loop, not recursion."} in last_prompt
    assert prompts[0].startswith("Enter runs the code") and prompts[-1].startswith(
        "The writer says the task is done"
    )
    assert result.stop_reason == "the writer said TERMINATE"
    assert len(result.executions) == 1


def test_exit_stops_at_once():
    with _script(BROKEN) as server, execbox.LocalExecutor() as ex:
        chat = Conversation(
            WriterAgent(ModelClient("m", base_url=server.base_url)),
            ex,
            human_input_mode="ALWAYS",
            human_input=lambda prompt: "exit",
        )
        result = chat.initiate_chat("go")
    assert result.stop_reason == "the person typed exit" and result.executions == []


@pytest.mark.parametrize("typed", ["exit", EOFError])
def test_exit_after_terminate_is_the_task_done(typed):
    # (was: "the person typed exit", which the CLIs (chat, explore) answer with exit status 1)
    def person(prompt):
        if not prompt.startswith("The writer says the task is done"):
            return ""
        if typed is EOFError:
            raise EOFError
        return typed

    with _script(FIXED, DONE) as server, execbox.LocalExecutor() as ex:
        chat = Conversation(
            WriterAgent(ModelClient("m", base_url=server.base_url)),
            ex,
            human_input_mode="ALWAYS",
            human_input=person,
        )
        result = chat.initiate_chat("fib")
    assert result.stop_reason == "the writer said TERMINATE; the person typed exit"
    assert [e.output for e in result.executions] == ["55\n"]


def test_terminate_mode_asks_only_at_the_end_and_text_continues():
    answers = iter(["Also print fib(5).", ""])
    with (
        _script(FIXED, "Done. TERMINATE", "```python\nprint(5)\n```", "fib(5) is 5. TERMINATE") as server,
        execbox.LocalExecutor() as ex,
    ):
        chat = Conversation(
            WriterAgent(ModelClient("m", base_url=server.base_url)),
            ex,
            human_input_mode="TERMINATE",
            human_input=lambda prompt: next(answers),
        )
        result = chat.initiate_chat("fib")
    assert result.human_input == ["Also print fib(5).", ""]
    assert [e.output for e in result.executions] == ["55\n", "5\n"]
    assert result.summary == "fib(5) is 5."


def test_reflection_summary_asks_the_model():
    with _script(DONE, "We computed fib(10) = 55.") as server, execbox.LocalExecutor() as ex:
        chat = Conversation(WriterAgent(ModelClient("m", base_url=server.base_url)), ex)
        result = chat.initiate_chat("fib", summary_method="reflection")
    assert result.summary == "We computed fib(10) = 55."
    assert "Summarise" in server.requests[-1]["messages"][0]["content"]


def test_no_code_gets_a_nudge():
    with _script("Let me think about it.", DONE) as server, execbox.LocalExecutor() as ex:
        chat = Conversation(WriterAgent(ModelClient("m", base_url=server.base_url)), ex)
        result = chat.initiate_chat("fib")
    assert "no code block in your message" in result.chat_history[2].content


def test_writer_system_message_names_the_languages():
    text = writer_system_message(["python", "bash", "node"])
    assert "```node" in text and "# filename:" in text and "TERMINATE" in text


def test_bad_options():
    with execbox.LocalExecutor() as ex, _script() as server:
        writer = WriterAgent(ModelClient("m", base_url=server.base_url))
        with pytest.raises(ConfigurationError, match="human_input_mode='SOMETIMES'"):
            Conversation(writer, ex, human_input_mode="SOMETIMES")
        with pytest.raises(ConfigurationError, match="max_turns must be"):
            Conversation(writer, ex).initiate_chat("x", max_turns=0)


def test_approval_sees_the_code_and_a_refusal_reaches_the_writer(tmp_path):
    seen = []

    def approve(request):
        seen.append(request.code)
        return Approval(False, "use the standard library only") if "import requests" in request.code else True

    script = [
        "```python\nimport requests\nopen('net.txt', 'w')\n```",
        "```python\nprint('stdlib')\n```",
        "Done. TERMINATE",
    ]
    with FakeModel(script) as server, execbox.LocalExecutor(workspace=tmp_path) as ex:
        writer = WriterAgent(ModelClient("m", base_url=server.base_url, api_key="k"))
        result = Conversation(writer, ex, approval=approve).initiate_chat("fetch something")
    assert "import requests" in seen[0] and len(seen) == 2
    assert result.chat_history[2].content == (
        "The user refused to run this: use the standard library only. Nothing was run."
    )
    assert not (tmp_path / "net.txt").exists()
    assert [r.reason for r in result.refusals] == ["use the standard library only"]
    assert len(result.executions) == 1 and result.executions[0].stdout == "stdlib\n"


def test_the_writer_is_told_whether_state_is_kept():
    assert "keeps one Python session" in writer_system_message(stateful=True)
    assert "fresh process" in writer_system_message()
