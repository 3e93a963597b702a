"""The answers of the JSON routes as typed models: the OpenAPI document's
component schemas are generated from them (``_openapi_schemas``). The
routes build their answers as dicts (``ExecutionResult.to_dict()``...);
these models say what those hold (the fuzz test checks every answer against
them). Fields an answer may leave out have a default; unknown fields are
allowed (a newer server may add some)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._bodies import FileSpec

__all__ = ["ANSWER_MODELS"]


class Answer(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(Answer):
    code: str
    message: str
    retryable: bool
    reason: Literal["ttl", "idle", "deleted", "node_lost"] | None = None


class Error(Answer):
    """An error (see error.code)."""

    error: ErrorDetail


class FetchError(Answer):
    error: str


class ExecutionResult(Answer):
    """ExecutionResult.to_dict(); /v1/run adds file_contents."""

    exit_code: int
    output: str
    stdout: str
    stderr: str
    error: dict[str, Any] | None
    blocks: list[dict[str, Any]] = []
    files: list[str] = []
    file_contents: dict[str, FileSpec | FetchError] = Field(
        {}, description="fetch_files: path -> the file, or why it could not be read"
    )


class Session(Answer):
    id: str
    state: Literal["open", "deleted"] = "open"
    backend: str = ""
    expires_at: str = Field(json_schema_extra={"format": "date-time"})
    idle_expires_at: str = Field(json_schema_extra={"format": "date-time"})
    running_execution: str | None = None
    key: str = Field(
        "",
        description="the session's secret, in the answer of POST /v1/sessions only: send it as "
        "X-Execbox-Session-Key on every request on the session (else 403 session_key_required)",
    )


class Execution(Answer):
    """Also the data of the SSE end event."""

    id: str = ""
    session_id: str = ""
    status: Literal["running", "completed", "cancelled", "failed"] = "running"
    result: ExecutionResult | None = None
    error: dict[str, Any] | None = None


class FileEntry(Answer):
    name: str = ""
    type: Literal["file", "dir"] = "file"
    size: int = 0
    mtime: float = 0.0
    mime: str | None = None


class FileList(Answer):
    path: str = "."
    files: list[FileEntry] = []


class JudgeResult(Answer):
    verdict: str = ""
    language: str = ""
    passed: int = 0
    total: int = 0
    duration_s: float = 0.0
    backend: str = ""
    compile_output: str | None = None
    cases: list[dict[str, Any]] = []


class Command(Answer):
    status: Literal["Finished", "Error", "TimeLimitExceeded"]
    execution_time: float | None = None
    return_code: int | None = None
    stdout: str | None = None
    stderr: str | None = None


class RunCodeResponse(Answer):
    """SandboxFusion's /run_code answer."""

    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    compile_result: Command | None
    run_result: Command | None
    executor_pod_name: str | None
    files: dict[str, str]


class ExtractedBlock(Answer):
    language: str = ""
    code: str = ""
    filename: str | None = None
    language_inferred: bool = False


class Extracted(Answer):
    blocks: list[ExtractedBlock]


class Pool(Answer):
    backend: str
    use: Literal["idle", "running", "session"]
    session_id: str = ""
    health: dict[str, Any]


class Info(Answer):
    version: str
    backends: dict[str, Any]
    limits: dict[str, Any]
    capabilities: dict[str, Any]
    load: dict[str, Any]
    pools: list[Pool]


ANSWER_MODELS: tuple[type[BaseModel], ...] = (
    Error,
    ExecutionResult,
    Session,
    Execution,
    FileList,
    JudgeResult,
    RunCodeResponse,
    Extracted,
    Info,
)
