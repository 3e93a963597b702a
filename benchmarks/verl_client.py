"""A load client that calls ``/run_code`` as veRL's code reward does
(volcengine/verl, ``verl/utils/reward_score/sandbox_fusion/utils.py``;
written here from reading it, none of its code copied).

What it keeps of veRL's behaviour:

- one ``POST`` per test case to the URL as configured (veRL sends only a
  URL: a tokened server is reached as ``/t/<token>/run_code``), the body
  ``{code, stdin, language, compile_timeout, run_timeout, files: {},
  fetch_files: []}``, with ``requests`` and no kept session (a connection
  per call);
- the request's timeout: ``compile_timeout + run_timeout + 10`` seconds,
  counted from the send, its time in the server's line included;
- a ``504`` is retried (3 tries at most, 1 s then 2 s apart); any other
  HTTP error, a transport error or the timeout scores ``-1`` at once;
- N concurrent workers (veRL's ``max_concurrent``: a thread pool);
- the score of a case: ``1`` the run finished and its stdout (trailing
  newlines dropped) is the expected one, ``0`` it is not, ``-1`` an API or
  sandbox error, ``-2`` a runtime error, ``-3`` a run timeout, ``-4`` a
  compile error or compile timeout.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import requests

__all__ = ["Case", "Scored", "run_cases", "score"]

API_SLACK_S = 10  # added to compile + run timeouts, as veRL does
TRIES = 3  # a 504 only
RETRY_STEP_S = 1.0


@dataclass(frozen=True)
class Case:
    code: str
    expected: str = ""
    stdin: str = ""
    language: str = "python"


@dataclass(frozen=True)
class Scored:
    score: int  # 1, 0, -1 .. -4 (see the module)
    seconds: float
    why: str  # the error or the statuses, for a report


def score(answer: dict, expected: str) -> tuple[int, str]:
    """A ``/run_code`` answer scored as veRL scores it (see the module)."""
    status = answer.get("status")
    compiled = answer.get("compile_result") or {}
    ran = answer.get("run_result") or {}
    what = f"{status}/{compiled.get('status')}/{ran.get('status')}"
    if status == "Success":
        if ran.get("status") != "Finished":
            return -1, what
        out = ran.get("stdout") or ""
        return (1 if str(out).rstrip("\n") == expected.rstrip("\n") else 0), what
    if status == "Failed":
        if compiled and (
            compiled.get("status") in ("Error", "TimeLimitExceeded")
            or (compiled.get("status") == "Finished" and compiled.get("return_code") != 0)
        ):
            return -4, what
        if ran:
            if ran.get("status") == "TimeLimitExceeded":
                return -3, what
            if ran.get("status") == "Error" or (
                ran.get("status") == "Finished" and ran.get("return_code") != 0
            ):
                return -2, what
        return -1, what
    return -1, what  # SandboxError or anything unknown


def call(url: str, case: Case, compile_timeout: float, run_timeout: float) -> Scored:
    body = {
        "compile_timeout": compile_timeout,
        "run_timeout": run_timeout,
        "code": case.code,
        "stdin": case.stdin,
        "language": case.language,
        "files": {},
        "fetch_files": [],
    }
    timeout = compile_timeout + run_timeout + API_SLACK_S
    started = time.perf_counter()
    why = "no try"
    for attempt in range(TRIES):
        try:
            answer = requests.post(url, json=body, timeout=timeout)
        except requests.RequestException as exc:
            return Scored(-1, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"[:200])
        if answer.status_code == 504:
            why = "504 on every try"
            if attempt < TRIES - 1:
                time.sleep(RETRY_STEP_S * (attempt + 1))
            continue
        if answer.status_code >= 400:
            return Scored(
                -1, time.perf_counter() - started, f"HTTP {answer.status_code}: {answer.text[:150]}"
            )
        try:
            got, what = score(answer.json(), case.expected)
        except ValueError as exc:
            return Scored(-1, time.perf_counter() - started, f"not JSON: {exc}")
        return Scored(got, time.perf_counter() - started, what)
    return Scored(-1, time.perf_counter() - started, why)


def run_cases(
    url: str, cases: Sequence[Case], workers: int, compile_timeout: float, run_timeout: float
) -> tuple[list[Scored], float]:
    """Every case from ``workers`` threads at once; the scores in order and the wall seconds."""
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        scored = list(pool.map(lambda case: call(url, case, compile_timeout, run_timeout), cases))
    return scored, time.perf_counter() - started
