"""A route and its OpenAPI operations, declared together where the route is
registered (``ApiRoute("/v1/run", run, post=Op(...))``): the methods it
answers are the operations it describes, and ``_openapi`` builds the
document's paths from the app's list of them. The pieces operations share:
errors, parameters, answer bodies."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from starlette.routing import Route

from ._openapi_schemas import ref

__all__ = ["BUSY", "EID", "ERROR", "PATH", "SESSION_ERRORS", "SID", "ApiRoute", "Op", "json_answer_of"]


def json_answer_of(schema: dict[str, Any], description: str = "OK") -> dict[str, Any]:
    """An answer whose JSON body has ``schema``."""
    return {"description": description, "content": {"application/json": {"schema": schema}}}


ERROR = {"$ref": "#/components/responses/Error"}
BUSY = {
    "description": "Past --max-concurrency and its line (--max-queue, --max-queue-wait), or --max-sessions; "
    "retry after Retry-After seconds",
    "headers": {"Retry-After": {"schema": {"type": "integer"}}},
    "content": {"application/json": {"schema": ref("Error")}},
}
GONE = {
    "description": "The session ended (error.code session_expired, error.reason ttl, idle, deleted "
    "or node_lost), or the execution is no longer kept (execution_gone: error.reason names the budget)",
    "content": {"application/json": {"schema": ref("Error")}},
}
SID = {"name": "sid", "in": "path", "required": True, "schema": {"type": "string"}}
EID = {"name": "eid", "in": "path", "required": True, "schema": {"type": "string"}}
PATH = {
    "name": "path",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "a path inside the session's workspace",
}
SESSION_ERRORS = {"401": ERROR, "404": ERROR, "410": GONE}  # 403 (every op): no or another session's key


@dataclass(frozen=True)
class Op:
    """One operation of the API: every one may answer 401 and 403, one with
    a JSON ``body`` (the model it is validated with) 415 too; ``extra``:
    keys of the operation's object written as they are."""

    summary: str
    responses: dict[str, Any]
    body: type[BaseModel] | None = None
    body_required: bool = True
    params: list[dict[str, Any]] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def document(self) -> dict[str, Any]:
        op: dict[str, Any] = {
            "summary": self.summary,
            "responses": {**self.responses, "401": ERROR, "403": ERROR},
        }
        if self.body is not None:
            op["responses"]["415"] = ERROR
            op["requestBody"] = {
                "required": self.body_required,
                "content": {"application/json": {"schema": ref(self.body.__name__)}},
            }
        if self.params:
            op["parameters"] = self.params
        return {**op, **self.extra}


class ApiRoute(Route):
    """A route that answers the methods it describes (``get=``, ``post=``...:
    an ``Op``, or an operation's object as it is written)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **ops: Op | dict[str, Any]) -> None:
        super().__init__(path, endpoint, methods=[method.upper() for method in ops])
        self.ops = ops
