"""Agents on top of the executors: an OpenAI-compatible model client, the
code-executor agent (run code from messages; or write, run, retry, reflect),
and the writer/executor conversation with a person in the loop.

    from execbox.agents import CodeExecutorAgent, ModelClient
    agent = CodeExecutorAgent("coder", execbox.SandboxExecutor(), model=ModelClient("gpt-4o-mini"),
                              max_retries_on_error=2)
    print(agent.run("What is the 20th Fibonacci number?").content)

The model client needs the OpenAI SDK (``pip install 'execbox[agents]'``);
the rest imports without it.
"""

from .._errors import ModelError
from ._conversation import ChatResult, Conversation, WriterAgent, format_chat_result, writer_system_message
from ._events import (CodeExecutionEvent, CodeGenerationEvent, Response, RetryDecisionEvent, StreamChunkEvent,
                      TextMessage, ThoughtEvent)
from ._executor_agent import CodeExecutorAgent, describe_result
from ._model import ModelClient, ModelReply
from ._usage import PRICES, Usage, register_price

__all__ = [
    "PRICES",
    "ChatResult",
    "CodeExecutionEvent",
    "CodeExecutorAgent",
    "CodeGenerationEvent",
    "Conversation",
    "ModelClient",
    "ModelError",
    "ModelReply",
    "Response",
    "RetryDecisionEvent",
    "StreamChunkEvent",
    "TextMessage",
    "ThoughtEvent",
    "Usage",
    "WriterAgent",
    "describe_result",
    "format_chat_result",
    "register_price",
    "writer_system_message",
]
