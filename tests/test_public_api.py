"""The public API is exactly what execbox/__init__.py exports."""

import execbox

EXPECTED = {
    "LANGUAGES",
    "BackendUnavailableError",
    "BlockResult",
    "Capabilities",
    "Case",
    "CaseResult",
    "CodeBlock",
    "ConfigurationError",
    "Display",
    "DockerExecutor",
    "DockerJupyterServer",
    "DockerPython",
    "Environment",
    "EnvironmentSetupError",
    "ProgressReporter",
    "ErrorInfo",
    "ExecboxError",
    "ExecutionResult",
    "Executor",
    "ExecutorClosedError",
    "FileInfo",
    "ImageMissingError",
    "Language",
    "JudgeResult",
    "Limits",
    "LocalExecutor",
    "NoCodeBlocksError",
    "PathEscapeError",
    "SandboxExecutor",
    "JupyterExecutor",
    "JupyterConnectionInfo",
    "LocalJupyterServer",
    "SystemPython",
    "UnenforcedLimitWarning",
    "Venv",
    "WeakerIsolationWarning",
    "Workspace",
    "WorkspaceError",
    "__version__",
    "backend_names",
    "canonical_language",
    "create_executor",
    "default_executor",
    "executor_from_config",
    "extract_code_blocks",
    "extract_from_messages",
    "get_backend",
    "infer_language",
    "BlockEndEvent",
    "BlockStartEvent",
    "DisplayEvent",
    "EndEvent",
    "OutputEvent",
    "RunEvent",
    "StartEvent",
    "TruncatedEvent",
    "Client",
    "ServiceBusyError",
    "ServiceError",
    "SessionGoneError",
    "ExecutionGoneError",
    "ClusterBusyError",
    "NodeLostError",
    "StallError",
}


def test_exports_are_pinned():
    assert set(execbox.__all__) == EXPECTED


def test_every_export_exists_and_is_public():
    for name in execbox.__all__:
        assert hasattr(execbox, name), name
        obj = getattr(execbox, name)
        module = getattr(obj, "__module__", "execbox") or "execbox"
        assert module.startswith("execbox"), (name, module)


def test_errors_form_one_tree():
    errors = [getattr(execbox, n) for n in execbox.__all__ if n.endswith("Error")]
    assert all(issubclass(e, execbox.ExecboxError) for e in errors)


def test_backends_register_through_entry_points():
    assert "local" in execbox.backend_names()
    assert execbox.get_backend("local") is execbox.LocalExecutor
    assert execbox.get_backend("docker") is execbox.DockerExecutor
    ex = execbox.default_executor()
    try:
        assert isinstance(ex, execbox.SandboxExecutor)
    finally:
        ex.close()


def test_images_module_api():
    import execbox.images

    assert set(execbox.images.__all__) == {
        "BASE_ALIAS",
        "ImageInfo",
        "ImageSpec",
        "base_tag",
        "build_image",
        "list_images",
    }


def test_agents_module_api():
    import execbox.agents

    assert set(execbox.agents.__all__) == {
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
        "AnthropicClient",
        "Approval",
        "ApprovalEvent",
        "ApprovalRequest",
        "AssistantAgent",
        "BufferedContext",
        "TokenLimitedContext",
        "ToolCall",
        "ToolCallEvent",
        "ToolResultEvent",
        "model_client",
        "FunctionalTermination",
        "GroupChat",
        "MaxMessageTermination",
        "RoundRobinGroupChat",
        "SelectorGroupChat",
        "SpeakerSelectionEvent",
        "TeamResult",
        "TerminationCondition",
        "TextMentionTermination",
        "initiate_chat",
    }
    assert issubclass(execbox.agents.ModelError, execbox.ExecboxError)


def test_tools_and_integrations_api():
    import execbox.integrations
    import execbox.integrations.ag2
    import execbox.integrations.autogen
    import execbox.tools
    import execbox.tools.mcp

    assert set(execbox.tools.__all__) == {"FunctionTool", "PythonTool", "ShellTool", "file_tools"}
    assert set(execbox.tools.mcp.__all__) == {
        "MAX_IMAGES",
        "MAX_IMAGE_BYTES",
        "MAX_TEXT_BYTES",
        "create_server",
        "serve",
    }
    assert execbox.integrations.__all__ == []
    assert set(execbox.integrations.ag2.__all__) == {
        "AG2CodeBlock",
        "AG2CodeExecutor",
        "AG2CodeResult",
        "ExecboxCodeExtractor",
    }
    assert set(execbox.integrations.autogen.__all__) == {
        "AutoGenCodeExecutor",
        "AutoGenCodeExecutorConfig",
        "AutoGenCodeResult",
        "CANCELLED_EXIT_CODE",
    }


def test_papers_module_api():
    import execbox.papers

    assert set(execbox.papers.__all__) == {
        "DEFAULT_GOAL",
        "PAPER_POLICIES",
        "Catalog",
        "CatalogError",
        "ChainedCatalog",
        "LocalCatalog",
        "PaperAsset",
        "PaperExecutor",
        "PaperNotFoundError",
        "RemyxCatalog",
        "create_agents",
        "default_catalog",
        "explore",
        "explorer_system_message",
    }
    assert issubclass(execbox.papers.PaperNotFoundError, execbox.ExecboxError)
    assert issubclass(execbox.papers.PaperExecutor, execbox.DockerExecutor)
