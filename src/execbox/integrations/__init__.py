"""Adapters that plug execbox executors into agent frameworks.

Each lives in its own module and imports its framework only when imported
itself, so ``import execbox.integrations`` works with neither installed:

- ``execbox.integrations.ag2``: ``AG2CodeExecutor``, an AG2 code executor
  (``autogen.coding.CodeExecutor``) for ``ConversableAgent(
  code_execution_config={"executor": ...})``; execbox's ``ag2`` extra.
- ``execbox.integrations.autogen``: ``AutoGenCodeExecutor``, an AutoGen
  code executor (``autogen_core.code_executor.CodeExecutor``, a component)
  for ``CodeExecutorAgent``; execbox's ``autogen`` extra.

Both wrap any execbox executor (``LocalExecutor``, ``SandboxExecutor``,
``JupyterExecutor``, ``DockerExecutor``...) or make one from a backend name
and its options.
"""

__all__: list[str] = []
