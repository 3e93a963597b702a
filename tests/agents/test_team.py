"""Teams of agents in one chat: round robin and a selector (a model over the
scripted server, or a function), termination conditions and their
combinations, AG2's initiate_chat; code runs on the real sandbox."""

from __future__ import annotations

import asyncio

import pytest
from fake_llm import FakeModel

import execbox
from execbox import ConfigurationError
from execbox.agents import (
    AssistantAgent,
    CodeExecutionEvent,
    CodeExecutorAgent,
    FunctionalTermination,
    MaxMessageTermination,
    ModelClient,
    RoundRobinGroupChat,
    SelectorGroupChat,
    SpeakerSelectionEvent,
    TeamResult,
    TextMentionTermination,
    TextMessage,
    initiate_chat,
)

CODE = "Here it is:\n```python\nprint(6 * 7)\n```"
DONE = "The answer is 42. TERMINATE"
TASK = "What is 6 * 7? Compute it with Python, then say TERMINATE."


def model(fake: FakeModel) -> ModelClient:
    return ModelClient("gpt-4o-mini", base_url=fake.base_url, api_key="k")


def coder(fake: FakeModel, name: str = "coder") -> AssistantAgent:
    return AssistantAgent(
        name, model(fake), system_message="Write Python in a fenced block; say TERMINATE when done."
    )


@pytest.fixture
def sandbox(tmp_path):
    with execbox.SandboxExecutor(workspace=tmp_path) as ex:
        yield ex


def test_coder_and_executor_take_turns_until_the_coder_says_terminate(sandbox):
    seen: list[TextMessage] = []
    with FakeModel([CODE, DONE]) as fake:
        executor = CodeExecutorAgent("executor", sandbox, sources=["coder"])
        team = RoundRobinGroupChat(
            [coder(fake), executor],
            termination=TextMentionTermination("TERMINATE") | MaxMessageTermination(10),
            on_message=seen.append,
        )
        result = team.run(TASK)
        second_prompt = fake.requests[1]["messages"]
    assert [m.source for m in result.messages] == ["user", "coder", "executor", "coder"]
    assert seen == result.messages
    assert result.messages[2].content == "42\n"  # the sandbox ran the coder's block
    # the task says TERMINATE too: only an agent's message ends the chat
    assert result.stop_reason == "coder said 'TERMINATE'"
    assert result.turns == 3 and result.last.content == DONE
    assert result.usage.total_tokens > 0
    # the coder heard the executor's output, and its own context kept the task
    assert second_prompt[-1] == {"role": "user", "content": "42\n"}
    assert {"role": "user", "content": TASK} in second_prompt


def test_stream_yields_messages_events_then_the_result(sandbox):
    with FakeModel([CODE, DONE]) as fake:
        team = RoundRobinGroupChat(
            [coder(fake), CodeExecutorAgent("executor", sandbox)], termination=TextMentionTermination()
        )
        items = list(team.stream(TASK))
    assert isinstance(items[-1], TeamResult)
    assert [type(i).__name__ for i in items[:-1]] == [
        "TextMessage",
        "TextMessage",
        "CodeExecutionEvent",
        "TextMessage",
        "TextMessage",
    ]
    run = next(i for i in items if isinstance(i, CodeExecutionEvent))
    assert run.result.exit_code == 0 and run.source == "executor"


def test_arun_gives_the_same_chat(sandbox):
    with FakeModel([CODE, DONE]) as fake:
        team = RoundRobinGroupChat(
            [coder(fake), CodeExecutorAgent("executor", sandbox)], termination=TextMentionTermination()
        )
        result = asyncio.run(team.arun(TASK))
    assert [m.content for m in result.messages[1:]] == [CODE, "42\n", DONE]
    assert result.stop_reason == "coder said 'TERMINATE'"


def test_the_model_selects_the_speakers_from_names_and_descriptions(sandbox):
    with (
        FakeModel(["coder", "The executor should run it.", "planner"]) as picker,
        FakeModel([CODE, DONE]) as fake,
    ):
        planner = AssistantAgent("planner", model(fake), description="Plans and checks the answer.")
        executor = CodeExecutorAgent("executor", sandbox)
        team = SelectorGroupChat(
            [planner, coder(fake), executor], model(picker), termination=TextMentionTermination()
        )
        items = list(team.stream(TASK))
        first_question = picker.requests[0]["messages"][-1]["content"]
        third_question = picker.requests[2]["messages"][-1]["content"]
    result = items[-1]
    assert isinstance(result, TeamResult)
    assert [m.source for m in result.messages] == ["user", "coder", "executor", "planner"]
    choices = [i for i in items if isinstance(i, SpeakerSelectionEvent)]
    assert [(c.speaker, c.reason) for c in choices] == [
        ("coder", "the model chose it"),
        ("executor", "the model chose it"),  # named in a sentence: still one agent
        ("planner", "the model chose it"),
    ]
    assert "- planner: Plans and checks the answer." in first_question
    assert "- executor: Runs the Python and shell code blocks" in first_question
    assert f"user: {TASK}" in first_question
    # the last speaker is not a candidate by default
    assert "Who of planner, coder should speak next" in third_question
    assert "executor: 42" in third_question
    # the selector's tokens are counted with the agents'
    assert result.usage.total_tokens > sum(c.usage.total_tokens for c in choices) > 0


def test_a_reply_naming_no_agent_is_asked_again_then_round_robin_decides(sandbox):
    with FakeModel(["Hmm.", "coder", "nobody", "no idea either"]) as picker, FakeModel([CODE]) as fake:
        team = SelectorGroupChat(
            [coder(fake), CodeExecutorAgent("executor", sandbox), coder(fake, "reviewer")],
            model(picker),
            max_turns=2,
        )
        items = list(team.stream(TASK))
        retry = picker.requests[1]["messages"]
    choices = [i for i in items if isinstance(i, SpeakerSelectionEvent)]
    assert choices[0].speaker == "coder" and choices[0].reason == "the model chose it when asked again"
    assert retry[-2] == {"role": "assistant", "content": "Hmm."}
    assert (
        "exactly one of these names" in retry[-1]["content"]
        and "coder, executor, reviewer" in retry[-1]["content"]
    )
    # two answers naming no candidate: the next after the last speaker (coder) in the team's order
    assert choices[1].speaker == "executor"
    assert choices[1].reason == (
        "the model named no candidate twice ('nobody' / 'no idea either'): round robin chose the next one"
    )
    assert items[-1].stop_reason == "max_turns=2 reached"


def test_a_function_picks_the_speakers_and_none_falls_back(sandbox):
    order = iter(["executor", None])

    def pick(messages):
        assert messages[0].content == TASK
        return next(order)

    given = TextMessage("user", CODE)
    with FakeModel([DONE]) as fake:
        team = SelectorGroupChat(
            [coder(fake), CodeExecutorAgent("executor", sandbox)],
            selector_func=pick,
            termination=TextMentionTermination(),
        )
        items = list(team.stream([TextMessage("user", TASK), given]))
    choices = [(c.speaker, c.reason) for c in items if isinstance(c, SpeakerSelectionEvent)]
    # None with no model: the one candidate left (the executor just spoke)
    assert choices == [
        ("executor", "selector_func chose it"),
        ("coder", "the only candidate besides the last speaker"),
    ]
    assert [m.content for m in items[-1].messages[2:]] == ["42\n", DONE]


def test_a_selector_function_naming_no_agent_is_an_error(sandbox):
    team = SelectorGroupChat([CodeExecutorAgent("executor", sandbox)], selector_func=lambda m: "Executor")
    with pytest.raises(
        ConfigurationError, match=r"selector_func returned 'Executor'.*return one of executor"
    ):
        team.run("go")


def test_max_messages_counts_the_task_and_stops_before_the_next_call():
    with FakeModel(["one", "two", "three", "four"]) as fake:
        team = RoundRobinGroupChat([coder(fake, "a"), coder(fake, "b")], termination=MaxMessageTermination(3))
        result = team.run("count")
        assert fake.remaining == 2  # no call past the limit
        # a second run goes on with the next speaker, its context kept
        again = team.run("more")
        third = fake.requests[2]["messages"]
    assert [m.source for m in result.messages] == ["user", "a", "b"]
    assert result.stop_reason == "3 messages reached (max_messages=3)"
    assert [m.source for m in again.messages] == ["user", "a", "b"]
    assert third[-2:] == [{"role": "user", "content": "two"}, {"role": "user", "content": "more"}]
    team.reset()
    assert all(agent._context == [] for agent in team.participants)  # type: ignore[attr-defined]


def test_a_function_ends_the_chat_with_its_reason():
    def enough(messages):
        return "the answer is in" if any("42" in m.content for m in messages[1:]) else None

    with FakeModel(["thinking", "it is 42", "unused"]) as fake:
        result = RoundRobinGroupChat([coder(fake)], termination=enough).run("6 * 7?")
    assert result.stop_reason == "the answer is in" and result.turns == 2

    with FakeModel(["x", "y"]) as fake:
        stop = FunctionalTermination(lambda messages: len(messages) > 2)
        result = RoundRobinGroupChat([coder(fake)], termination=stop).run("go")
    assert result.stop_reason == "<lambda>() returned True" and result.turns == 2


def test_conditions_combine_with_or_and_and():
    def say(source, text):
        return TextMessage(source, text)

    both = TextMentionTermination("APPROVE", sources=["reviewer"]) & MaxMessageTermination(3)
    chat = [say("user", "APPROVE this")]
    assert both.check(chat, ()) is None  # the task never mentions
    chat.append(say("coder", "APPROVE"))
    assert both.check(chat, chat[-1:]) is None  # not from the reviewer
    chat.append(say("reviewer", "APPROVE"))
    assert both.check(chat, chat[-1:]) == "reviewer said 'APPROVE' and 3 messages reached (max_messages=3)"

    # & remembers a part that fired on an earlier turn; reset forgets it
    late = TextMentionTermination("A") & TextMentionTermination("B")
    assert late.check([], [say("x", "A")]) is None
    assert late.check([], [say("y", "B")]) == "x said 'A' and y said 'B'"
    late.reset()
    assert late.check([], [say("y", "B")]) is None

    either = (
        MaxMessageTermination(5) | TextMentionTermination("STOP") | FunctionalTermination(lambda m: False)
    )
    assert either.check([say("u", "go")], [say("a", "STOP now")]) == "a said 'STOP'"
    assert either.check([say("u", "go")], [say("a", "on")]) is None


def test_initiate_chat_the_executor_starts_and_the_writer_answers(sandbox):
    with FakeModel([CODE, DONE]) as fake:
        executor = CodeExecutorAgent("executor", sandbox)
        result = initiate_chat(executor, coder(fake, "writer"), "Compute 6 * 7.")
        first = fake.requests[0]["messages"]
    assert [m.source for m in result.messages] == ["executor", "writer", "executor", "writer"]
    assert result.messages[2].content == "42\n"
    assert result.stop_reason == "writer said 'TERMINATE'"
    assert first[-1] == {"role": "user", "content": "Compute 6 * 7."}


def test_no_condition_still_stops():
    with FakeModel(["a", "b", "c"]) as fake:
        result = RoundRobinGroupChat([coder(fake)], max_turns=2).run("go")
    assert result.stop_reason == "max_turns=2 reached" and fake.remaining == 1


def test_bad_input_gets_clear_errors(sandbox):
    with FakeModel() as fake:
        a = coder(fake, "a")
        with pytest.raises(ConfigurationError, match="needs at least one agent"):
            RoundRobinGroupChat([])
        with pytest.raises(ConfigurationError, match="two agents of the team are named 'a'"):
            RoundRobinGroupChat([a, coder(fake, "a")])
        with pytest.raises(ConfigurationError, match="takes execbox agents"):
            RoundRobinGroupChat([a, "executor"])  # type: ignore[list-item]
        with pytest.raises(ConfigurationError, match="takes a list of agents"):
            RoundRobinGroupChat(a)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="max_turns must be"):
            RoundRobinGroupChat([a], max_turns=0)
        with pytest.raises(ConfigurationError, match="termination=42"):
            RoundRobinGroupChat([a], termination=42)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="combine conditions only"):
            TextMentionTermination() | "STOP"  # type: ignore[operator]
        with pytest.raises(ConfigurationError, match=">= 1, got 0"):
            MaxMessageTermination(0)
        with pytest.raises(ConfigurationError, match="list of agent names"):
            TextMentionTermination("X", sources="coder")
        with pytest.raises(ConfigurationError, match="needs a model to pick the speakers"):
            SelectorGroupChat([a])
        with pytest.raises(ConfigurationError, match="must be a model client"):
            SelectorGroupChat([a], "gpt-4o")  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match=r"selector_prompt does not format.*'task'"):
            SelectorGroupChat([a], model(fake), selector_prompt="Pick for {task}")
        with pytest.raises(ConfigurationError, match="no agent named 'b': it has a"):
            RoundRobinGroupChat([a]).agent("b")
