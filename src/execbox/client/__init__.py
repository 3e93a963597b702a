"""The Python client of ``execbox serve`` (execbox's ``client`` extra:
httpx, imported when a ``Client`` is made).

A run in a fresh workspace, files in and out::

    >>> from execbox import Client
    >>> with Client("http://127.0.0.1:8000") as client:     # token: $EXECBOX_TOKEN
    ...     result = client.run("open('out.txt', 'w').write(open('in.txt').read().upper())",
    ...                         files={"in.txt": "hello"}, fetch_files=["out.txt"])
    ...     result.fetched["out.txt"]
    b'HELLO'

Many runs at once, each line as it finishes (``(index, result)``; a
request the server refused comes as its ``ServiceError``)::

    >>> for index, result in client.batch(["print(1)", {"code": "echo hi", "language": "sh"}]):
    ...     print(index, result.stdout)

A session keeps its executor (a kernel's variables, the workspace's files)
between runs; ``stream`` yields the run's typed events (``StartEvent`` ...
``OutputEvent`` ... ``EndEvent`` with the whole result), resuming by
itself if the connection drops; ``cancel`` stops what runs::

    >>> with client.session(idle_ttl_s=300) as session:
    ...     session.upload("data.csv", b"a,b\\n1,2\\n")
    ...     for event in session.stream("print(open('data.csv').read())"):
    ...         if isinstance(event, execbox.OutputEvent):
    ...             print(event.text, end="")
    ...     session.download("data.csv")

Failures of the code are data (``result.error``); the service's are
``ServiceError`` (``status``, ``code``, ``message``, ``retryable``,
``retry_after``): ``SessionGoneError`` (410, ``reason``: ttl, idle,
deleted), ``ExecutionGoneError`` (410 ``execution_gone``: the session is
open, one of its executions no longer kept; ``reason``: the server's bound)
and ``ServiceBusyError`` (429, ``retry_after``). A server that is
not there is a ``ServiceError`` with code ``unreachable`` naming the URL.

The server's answers are read as hostile: each bounded
(``max_answer_bytes``: ``too_large``), by a deadline (``timeout_s``,
``run_timeout_s``: ``timeout``), checked field by field (``bad_answer``);
no redirect is followed (``redirect``: the token stays with its origin).
"""

from .._errors import ExecutionGoneError, ServiceBusyError, ServiceError, SessionGoneError
from ._client import Client
from ._result import RunResult
from ._session import Session

__all__ = [
    "Client",
    "ExecutionGoneError",
    "RunResult",
    "ServiceBusyError",
    "ServiceError",
    "Session",
    "SessionGoneError",
]
