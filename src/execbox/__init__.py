"""execbox: run code written by language models, safely and fast, and hand
the results back.

    >>> import execbox
    >>> blocks = execbox.extract_code_blocks(reply)
    >>> with execbox.LocalExecutor() as ex:
    ...     result = ex.run(blocks)
    >>> print(result.to_text())
"""

from ._errors import (
    BackendUnavailableError,
    ClusterBusyError,
    ConfigurationError,
    EnvironmentSetupError,
    ExecboxError,
    ExecutionGoneError,
    ExecutorClosedError,
    ImageMissingError,
    NoCodeBlocksError,
    NodeLostError,
    PathEscapeError,
    ServiceBusyError,
    ServiceError,
    SessionGoneError,
    StallError,
    WeakerIsolationWarning,
    WorkspaceError,
)
from ._extract import extract_code_blocks, extract_from_messages, infer_language
from ._judge import Case, CaseResult, JudgeResult
from ._languages import LANGUAGES, Language, canonical_language
from ._models import BlockResult, CodeBlock, Display, ErrorInfo, ExecutionResult, Limits
from ._progress import ProgressReporter
from ._run_events import (
    BlockEndEvent,
    BlockStartEvent,
    DisplayEvent,
    EndEvent,
    OutputEvent,
    RunEvent,
    StartEvent,
    TruncatedEvent,
)
from ._version import __version__
from ._workspace import FileInfo, Workspace
from .backends import (
    Capabilities,
    Executor,
    UnenforcedLimitWarning,
    backend_names,
    create_executor,
    default_executor,
    executor_from_config,
    get_backend,
)
from .backends.docker import DockerExecutor
from .backends.jupyter import DockerJupyterServer, JupyterConnectionInfo, JupyterExecutor, LocalJupyterServer
from .backends.local import LocalExecutor
from .backends.sandbox import SandboxExecutor
from .client import Client
from .environments import DockerPython, Environment, SystemPython, Venv

__all__ = [
    "LANGUAGES",
    "BackendUnavailableError",
    "BlockEndEvent",
    "BlockResult",
    "BlockStartEvent",
    "Capabilities",
    "Case",
    "CaseResult",
    "Client",
    "ClusterBusyError",
    "CodeBlock",
    "ConfigurationError",
    "Display",
    "DisplayEvent",
    "DockerExecutor",
    "DockerJupyterServer",
    "DockerPython",
    "EndEvent",
    "Environment",
    "EnvironmentSetupError",
    "ErrorInfo",
    "ExecboxError",
    "ExecutionGoneError",
    "ExecutionResult",
    "Executor",
    "ExecutorClosedError",
    "FileInfo",
    "ImageMissingError",
    "JudgeResult",
    "JupyterConnectionInfo",
    "JupyterExecutor",
    "Language",
    "Limits",
    "LocalExecutor",
    "LocalJupyterServer",
    "NoCodeBlocksError",
    "NodeLostError",
    "OutputEvent",
    "PathEscapeError",
    "ProgressReporter",
    "RunEvent",
    "SandboxExecutor",
    "ServiceBusyError",
    "ServiceError",
    "SessionGoneError",
    "StallError",
    "StartEvent",
    "SystemPython",
    "TruncatedEvent",
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
]
