"""``execbox chat TASK --tools``: the model gets execbox's tools (Python,
shell, the workspace's files) through function calling instead of writing
fenced blocks. Each call, its result and the cost are printed; without
``--auto`` the person approves each call first (Enter runs it, text refuses
it and is the reason the model hears)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["run_tool_chat"]

SHOWN_RESULT = 2000


def run_tool_chat(args: argparse.Namespace, model: Any, executor: Any) -> int:
    from ..agents import (
        ApprovalEvent,
        AssistantAgent,
        Response,
        StreamChunkEvent,
        ThoughtEvent,
        ToolCallEvent,
        ToolResultEvent,
    )
    from ..tools import PythonTool, ShellTool, file_tools

    tools = [PythonTool(executor), ShellTool(executor), *file_tools(executor)]
    agent = AssistantAgent(
        "assistant",
        model,
        tools=tools,
        max_tool_iterations=args.max_turns or 10,
        approval=None if args.auto else approve_call,
        stream_model=True,
    )
    _rule("user")
    print(args.task, flush=True)
    response = None
    streaming = False
    for item in agent.stream(args.task):
        if isinstance(item, StreamChunkEvent):
            if not streaming:
                _rule("assistant")
                streaming = True
            print(item.content, end="", flush=True)
            continue
        if streaming:
            print(flush=True)
            streaming = False
        if isinstance(item, ThoughtEvent):
            _rule("thought")
            print(item.content, flush=True)
        elif isinstance(item, ToolCallEvent):
            for call in item.calls:
                _rule(f"call {call.name}")
                print(_arguments(call.arguments), flush=True)
        elif isinstance(item, ApprovalEvent) and not item.approved:
            print(f"(refused: {item.reason or 'no reason given'})", flush=True)
        elif isinstance(item, ToolResultEvent):
            _rule(f"result {item.name}" + (" (error)" if item.is_error else ""))
            text = item.content
            print(
                text
                if len(text) <= SHOWN_RESULT
                else text[:SHOWN_RESULT] + f"\n... ({len(text)} characters)",
                flush=True,
            )
        elif isinstance(item, Response):
            response = item
    assert response is not None
    print(f"\nModel usage: {response.usage.describe()}")
    return 1 if response.content.startswith("Stopped after") else 0


def approve_call(request: Any) -> Any:
    from ..agents import Approval

    sys.stderr.write(f"\nRun {request.tool_name}? Enter runs it; text refuses it (the model hears why): ")
    sys.stderr.flush()
    line = sys.stdin.readline()
    if not line:
        return Approval(False, "the person was not there to approve it")
    typed = line.strip()
    return Approval(True) if typed in ("", "y", "yes") else Approval(False, typed)


def _arguments(arguments: str) -> str:
    try:
        value = json.loads(arguments)
    except ValueError:
        return arguments
    if isinstance(value, dict) and set(value) <= {"code", "libraries", "command"}:
        shown = value.get("code") or value.get("command") or ""
        if value.get("libraries"):
            shown = f"(libraries: {', '.join(value['libraries'])})\n{shown}"
        return shown
    return json.dumps(value, indent=2, ensure_ascii=False)


def _rule(label: str) -> None:
    print(f"\n── {label} " + "─" * max(0, 60 - len(label)), flush=True)
