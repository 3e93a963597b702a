"""A block's run in a ``DockerExecutor``'s container (``BlockAttempts``, the
part of the executor that does it): through the agent or a ``docker exec``,
again in a new container where the old one had stopped or an earlier block's
fork bomb held every pid; then what a SIGKILL meant (the memory limit, or
the container's or agent's death: the next block gets a new container).
"""

from __future__ import annotations

import functools
import re
import threading
from typing import TYPE_CHECKING, Any

from ..._docker_engine import is_gone
from ..._errors import (
    BackendUnavailableError,
    StallError,
)
from ..._languages import Language
from ..._models import ErrorInfo, Limits
from ..._workspace import Workspace
from .._process import Cancellation, OutputCallback
from .._result import Outcome, outcome_to_result
from ._agent_run import run_block
from ._container import (
    WORKDIR,
)
from ._exec import ContainerGone, kill_leftovers, memory_kills, run_exec
from ._link import AgentLink, AgentOutcome, AgentStalled

__all__ = ["BlockAttempts"]


class BlockAttempts:
    """The blocks' runs, a part of ``DockerExecutor`` (which sets these
    attributes in its ``__init__``)."""

    workspace: Workspace
    limits: Limits
    user: str
    _client: Any
    _container_id: str | None
    _link: AgentLink | None
    _oom_seen: int
    _container_lock: threading.Lock
    _live_tokens: set[str]

    if TYPE_CHECKING:

        def _start_container(self) -> None: ...
        def _kill_container(self, container_id: str) -> None: ...

    def _execute_argv(
        self,
        language: Language,
        argv: list[str],
        in_agent: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None = None,
    ) -> Outcome:
        outcome, container_id, note = self._attempts(argv, in_agent, cancel, on_output, stdin_path)
        result = outcome_to_result(language.name, outcome, self.limits)
        if isinstance(outcome, AgentOutcome) and outcome.malformed:
            result = self._container_died(
                container_id,
                result,
                (
                    f"{outcome.malformed}: its stream cannot be trusted, so the block's end is not "
                    "taken from it; the container was killed, and a new one starts with the next block"
                ),
            )
        elif outcome.exit_code == 137 and not outcome.timed_out and not outcome.cancelled:
            result = self._after_kill(language, outcome, result, container_id)
        if note:
            result.output = note + result.output
        return result

    def _attempts(
        self,
        argv: list[str],
        in_agent: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[Any, str, str]:
        """Run ``argv`` in the container, in a new one if it had stopped:
        (its outcome, the container's id, a note for the output)."""
        note = ""
        with self._container_lock:
            if self._container_id is None:
                self._start_container()
            container_id = self._container_id
        assert container_id is not None
        for attempt in (1, 2):
            try:
                outcome = self._run(
                    container_id, argv, in_agent, cancel, on_output, stdin_path, env=env, timeout_s=timeout_s
                )
            except ContainerGone as gone:
                if attempt == 2 and isinstance(gone, AgentStalled):
                    raise StallError(
                        f"docker: the agent of a new container did not answer either: {gone}",
                        waiting_for="the docker agent's answer",
                    ) from None
                if attempt == 2:
                    raise BackendUnavailableError(
                        "docker", f"a new container stopped at once too: {gone}"
                    ) from None
                note = (
                    f"Note: the container had stopped ({gone}); a new one was started for this block. "
                    "Files in /tmp and running processes were lost; the workspace was kept.\n"
                )
                container_id = self._replace_container(container_id)
                continue
            if attempt == 1 and _could_not_fork(outcome):
                # an earlier block's fork bomb outlived it and held every pid: it
                # is killed, and this block runs as if nothing had happened
                kill_leftovers(
                    self._client, container_id, functools.partial(self._kill_container, container_id)
                )
                if not self._running(container_id):
                    container_id = self._replace_container(container_id)
                continue
            break
        return outcome, container_id, note

    def _replace_container(self, gone_id: str) -> str:
        with self._container_lock:
            if self._container_id in (gone_id, None):
                if self._link is not None:
                    self._link.close()
                # (stopped, mostly; not where its agent's stream was found malformed between blocks)
                self._kill_container(gone_id)
                self._start_container()
            assert self._container_id is not None
            return self._container_id

    def _run(
        self,
        container_id: str,
        argv: list[str],
        python_file: str | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin_path: str | None = None,
        *,
        env: dict[str, str] | None = None,
        timeout_s: float | None = None,
    ) -> Any:
        timeout_s = self.limits.timeout_s if timeout_s is None else timeout_s
        with self._container_lock:
            link = self._link if self._container_id == container_id else None
        if link is not None:
            return run_block(
                link,
                argv=argv,
                python_file=python_file,
                stdin_path=stdin_path,
                env=env,
                workdir=WORKDIR,
                timeout_s=timeout_s,
                output_limit=self.limits.max_output_bytes,
                cancel=cancel,
                on_output=on_output,
                kill_container=lambda: self._drop_container(container_id),
            )
        if stdin_path is not None:  # no agent in this image: the shell gives the program its stdin
            argv = ["sh", "-c", 'exec "$@" < "$0"', stdin_path, *argv]
        return run_exec(
            self._client,
            container_id,
            argv,
            env=env or {},
            workdir=WORKDIR,
            timeout_s=timeout_s,
            output_limit=self.limits.max_output_bytes,
            cancel=cancel,
            on_output=on_output,
            live_tokens=self._live_tokens,
            kill_container=lambda: self._kill_container(container_id),
        )

    def _after_kill(self, language: Language, outcome: Any, result: Outcome, container_id: str) -> Outcome:
        """A SIGKILLed block: the memory limit, or the container's death."""
        if isinstance(outcome, AgentOutcome) and outcome.agent_stalled:
            return self._container_died(
                container_id,
                result,
                (
                    "execbox's agent in the container stopped answering while the block ran (stopped from "
                    "outside?); the container was killed, and a new one starts with the next block"
                ),
            )
        if isinstance(outcome, AgentOutcome) and outcome.agent_died:
            self._kill_container(container_id)  # (it stops with its agent; one that did not, is stopped)
            return self._container_died(
                container_id,
                result,
                (
                    "execbox's agent in the container died while the block ran (the memory limit, "
                    "Limits.memory_mb, was hit, or it was killed from outside); a new container starts "
                    "with the next block"
                ),
            )
        if isinstance(outcome, AgentOutcome) and outcome.oom_kills is not None:
            kills: int | None = outcome.oom_kills
        else:
            kills = memory_kills(self._client, container_id)
        if kills is not None and kills > self._oom_seen:
            self._oom_seen = kills
            outcome.memory_exceeded_mb = self.limits.effective_memory_mb()
            return outcome_to_result(language.name, outcome, self.limits)
        if kills is None and not self._running(container_id):
            return self._container_died(
                container_id,
                result,
                (
                    "the container stopped while the block ran (killed from outside, or its init died); "
                    "a new container starts with the next block"
                ),
            )
        return result

    def _container_died(self, container_id: str, result: Outcome, note: str) -> Outcome:
        """The block's result when its container died under it: the next block starts a new one."""
        with self._container_lock:
            if self._container_id == container_id:
                self._container_id = None
        result.error = ErrorInfo("ContainerDied", note)
        result.output += note + ".\n"
        return result

    def _running(self, container_id: str) -> bool:
        """False once the container stops; a container being killed still
        shows as running for a moment, so wait a little for it to stop."""
        try:
            self._client.api.wait(container_id, timeout=0.5, condition="not-running")
        except Exception as exc:  # noqa: BLE001 - a read timeout: it still runs
            return not is_gone(exc)
        return False

    def _drop_container(self, container_id: str) -> None:
        """Kill the container, and start a new one for the next block (its
        agent did not answer: a block stopped or wedged it)."""
        self._kill_container(container_id)
        with self._container_lock:
            if self._container_id == container_id:
                self._container_id = None


def _could_not_fork(outcome: Any) -> bool:
    """The block's wrapper itself could not start the block."""
    return (
        outcome.exit_code == 2
        and re.fullmatch(r"execbox: \d+: Cannot fork\n", outcome.capture.combined.text()) is not None
    )
