"""Agents on top of the executors: model clients (OpenAI-compatible chat
completions, Anthropic's Messages API), the function-calling assistant,
the code-executor agent (run code from messages; or write, run, retry,
reflect), the writer/executor conversation with a person in the loop, and
teams of agents in one chat (round robin, or a selector picks the speaker).

    from execbox.agents import AssistantAgent, ModelClient
    from execbox.tools import PythonTool
    agent = AssistantAgent("assistant", ModelClient("gpt-4o-mini"), tools=[PythonTool()])
    print(agent.run("What is the 20th Fibonacci number?").content)

The clients need their SDK (execbox's ``agents`` extra); the rest
imports without them.
"""

from .._errors import ModelError
from ._anthropic import AnthropicClient
from ._approval import Approval, ApprovalRequest
from ._assistant import AssistantAgent
from ._context import BufferedContext, TokenLimitedContext
from ._conversation import ChatResult, Conversation, WriterAgent, format_chat_result, writer_system_message
from ._events import (
    ApprovalEvent,
    CodeExecutionEvent,
    CodeGenerationEvent,
    Response,
    RetryDecisionEvent,
    StreamChunkEvent,
    TextMessage,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from ._executor_agent import CodeExecutorAgent, describe_result
from ._model import ModelClient
from ._providers import model_client
from ._reply import ModelReply, ToolCall
from ._selector import SelectorGroupChat
from ._team import GroupChat, RoundRobinGroupChat, SpeakerSelectionEvent, TeamResult, initiate_chat
from ._termination import (
    FunctionalTermination,
    MaxMessageTermination,
    TerminationCondition,
    TextMentionTermination,
)
from ._usage import PRICES, Usage, register_price

__all__ = [
    "PRICES",
    "AnthropicClient",
    "Approval",
    "ApprovalEvent",
    "ApprovalRequest",
    "AssistantAgent",
    "BufferedContext",
    "ChatResult",
    "CodeExecutionEvent",
    "CodeExecutorAgent",
    "CodeGenerationEvent",
    "Conversation",
    "FunctionalTermination",
    "GroupChat",
    "MaxMessageTermination",
    "ModelClient",
    "ModelError",
    "ModelReply",
    "Response",
    "RetryDecisionEvent",
    "RoundRobinGroupChat",
    "SelectorGroupChat",
    "SpeakerSelectionEvent",
    "StreamChunkEvent",
    "TeamResult",
    "TerminationCondition",
    "TextMentionTermination",
    "TextMessage",
    "ThoughtEvent",
    "TokenLimitedContext",
    "ToolCall",
    "ToolCallEvent",
    "ToolResultEvent",
    "Usage",
    "WriterAgent",
    "describe_result",
    "format_chat_result",
    "initiate_chat",
    "model_client",
    "register_price",
    "writer_system_message",
]
