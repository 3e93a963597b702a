"""What the AG2 and AutoGen adapters share: choosing the execbox executor
(from execbox's options or the peers' own: ``timeout=``, ``work_dir=``...),
turning a framework's code block (code + language) into an execbox
``CodeBlock``, the paths a result reports, and the attributes AG2's and
AutoGen's executors have. No framework is imported here.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import ConfigurationError
from .._extract import _filename_comment, infer_language
from .._foreign import EXECUTOR_HINTS, refuse_foreign
from .._models import CodeBlock, ExecutionResult, Limits
from ..backends import DEFAULT_BACKEND, Executor, create_executor, get_backend
from ..environments import Venv

__all__ = [
    "PeerAttributes",
    "PeerSettings",
    "as_execbox_block",
    "code_file",
    "make_executor",
    "output_files",
    "peer_options",
    "remove_code_files",
    "warn_stateless_restart",
]


@dataclass(frozen=True)
class PeerSettings:
    """What the peers' options ask of the adapter itself: ``cleanup``
    (``cleanup_temp_files=True``: the adapter removes a block's code file
    after the run, and still reports its path) and ``work_dir`` as given."""

    cleanup: bool = False
    work_dir: Path | None = None


# The peers' docker executor options no execbox executor takes, and execbox's way.
_DOCKER_ONLY = {
    "extra_hosts": "give container_create_kwargs={'extra_hosts': {...}} (the docker backend's)",
    "init_command": "run it as the first block, or build it into the image (environment=DockerPython(...))",
}


def peer_options(owner: str, options: dict[str, Any]) -> tuple[dict[str, Any], PeerSettings]:
    """execbox's options for the options of AG2's and AutoGen's
    ``LocalCommandLineCodeExecutor``: ``timeout`` (``limits.timeout_s``),
    ``work_dir`` (``workspace``; None: a temporary one), ``virtual_env_context``
    (``environment=Venv(path=...)``), ``cleanup_temp_files`` or the docker
    executor's ``delete_tmp_files`` (the adapter's); ``functions``,
    ``functions_module`` and ``execution_policies`` are execbox's names too."""
    options = dict(options)
    for name, way in _DOCKER_ONLY.items():
        if name in options:
            raise ConfigurationError(f"{owner}({name}=...) is not an execbox option: {way}")
    cleanup = False
    if "cleanup_temp_files" in options and "delete_tmp_files" in options:
        raise ConfigurationError(
            f"{owner} got cleanup_temp_files= and delete_tmp_files= (the same option): give one"
        )
    for name in ("cleanup_temp_files", "delete_tmp_files"):  # the local and the docker executor's names
        if name in options:
            cleanup = options.pop(name)
            if not isinstance(cleanup, bool):
                raise ConfigurationError(f"{owner}({name}={cleanup!r}) takes True or False")
    if "timeout" in options:
        timeout = options.pop("timeout")
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            raise ConfigurationError(f"{owner}(timeout={timeout!r}): give a number of seconds above 0")
        limits = options.get("limits") or Limits()
        if not isinstance(limits, Limits):
            raise ConfigurationError(f"{owner}(limits=...) takes execbox.Limits, not {type(limits).__name__}")
        if limits.timeout_s not in (Limits().timeout_s, timeout):
            raise ConfigurationError(
                f"{owner} got timeout={timeout!r} and limits=Limits(timeout_s={limits.timeout_s!r}): "
                "give the timeout once (limits=Limits(timeout_s=...) is execbox's spelling)"
            )
        options["limits"] = limits.replace(timeout_s=timeout)
    work_dir = None
    if options.get("work_dir", "") is None:  # the peers' default: a temporary folder
        del options["work_dir"]
    if "work_dir" in options:
        given = options.pop("work_dir")
        if "workspace" in options:
            raise ConfigurationError(
                f"{owner} got work_dir= and workspace=: give one (workspace= is execbox's spelling)"
            )
        if not isinstance(given, str | os.PathLike):
            raise ConfigurationError(f"{owner}(work_dir=...) takes a folder path, not {type(given).__name__}")
        work_dir = Path(given)
        if not work_dir.absolute().parent.is_dir():  # as the peers: they create the last folder only
            raise FileNotFoundError(
                f"{owner}(work_dir={str(given)!r}): {work_dir.absolute().parent} does not exist; "
                "create it, or give workspace= (execbox creates the folders leading to it)"
            )
        options["workspace"] = given
    if "virtual_env_context" in options:
        context = options.pop("virtual_env_context")
        if "environment" in options:
            raise ConfigurationError(
                f"{owner} got virtual_env_context= and environment=: give one "
                "(environment=Venv(path=...) is execbox's spelling)"
            )
        env_dir = getattr(context, "env_dir", None)
        if not isinstance(env_dir, str | os.PathLike):
            raise ConfigurationError(
                f"{owner}(virtual_env_context=...) takes what venv.EnvBuilder().ensure_directories(path) "
                f"returns (with env_dir), not {context!r}; or give environment=Venv(path=...)"
            )
        options["environment"] = Venv(path=env_dir)
    return options, PeerSettings(cleanup=cleanup, work_dir=work_dir)


def make_executor(
    owner: str, executor: Executor | None, backend: str | None, options: dict[str, Any]
) -> Executor:
    """The executor an adapter wraps: the one given, or a new one of
    ``backend`` made with ``options`` (the peers' names translated by
    ``peer_options`` first; one with no meaning here is a
    ``ConfigurationError`` naming execbox's way)."""
    if executor is None:
        try:
            refuse_foreign(get_backend(backend or DEFAULT_BACKEND), options, EXECUTOR_HINTS)
        except TypeError as exc:
            raise ConfigurationError(f"{owner}(backend={backend or DEFAULT_BACKEND!r}): {exc}") from None
        return create_executor(backend, **options)
    if not isinstance(executor, Executor):
        raise ConfigurationError(
            f"{owner}(executor=...) takes an execbox executor such as execbox.LocalExecutor(), "
            f"not {type(executor).__name__}; or give backend='sandbox' (and its options) instead"
        )
    if backend is not None or options:
        given = ", ".join(["backend"] * (backend is not None) + sorted(options))
        raise ConfigurationError(
            f"{owner} got an executor and also {given}: set those options on the executor you "
            "pass, or pass no executor and let the adapter make one"
        )
    return executor


def as_execbox_block(code: str, language: str | None, filename: str | None = None) -> CodeBlock:
    """An execbox block from a framework's block.

    A block without a language gets one inferred (as execbox's own extractor
    does); a filename comment on the first line (``# filename: x.py``, or
    a bare ``# x.py`` as the frameworks read it) names the file when the
    framework's extractor dropped it.
    """
    if not isinstance(code, str):
        raise ConfigurationError(f"a code block's code must be a str, not {type(code).__name__}")
    language = (language or "").strip()
    inferred = not language
    if inferred:
        language = infer_language(code)
    return CodeBlock(
        language, code, filename or _filename_comment(code, language), language_inferred=inferred
    )


def code_file(executor: Executor, result: ExecutionResult) -> str | None:
    """The absolute path of the first block's code file, as AG2 and AutoGen
    report it (``code_file``)."""
    if not result.code_files:
        return None
    return str(executor.workspace.path / result.code_files[0])


def output_files(executor: Executor, result: ExecutionResult) -> list[str]:
    """Absolute paths of the files the run created or changed, then the
    files its rich outputs were saved in (a Jupyter kernel's images and
    HTML, also under an ``output_dir`` outside the workspace), as the peers'
    Jupyter executors report them."""
    paths = [str(executor.workspace.path / name) for name in result.files]
    for display in result.displays:
        if display.path is not None:
            path = str(executor.workspace.path / display.path)  # an absolute path stays as it is
            if path not in paths:
                paths.append(path)
    return paths


def remove_code_files(executor: Executor, blocks: list[CodeBlock], result: ExecutionResult) -> None:
    """Remove the code files execbox named for the blocks (``cleanup_temp_files``);
    a block saved under its own ``# filename:`` is the user's and stays."""
    for block, ran in zip(blocks, result.blocks, strict=False):
        if ran.code_file and not block.filename:
            executor.workspace.remove_internal(ran.code_file)


class PeerAttributes:
    """The attributes of AG2's and AutoGen's ``LocalCommandLineCodeExecutor``
    that mean something on an execbox executor (the adapter's ``_wrapped()``)."""

    _work_dir: Path | None = None
    _cleanup: bool = False

    def _wrapped(self) -> Executor:
        raise NotImplementedError

    def _adopt(
        self, owner: str, executor: Executor | None, backend: str | None, options: dict[str, Any]
    ) -> Executor:
        """The executor the adapter wraps (``make_executor``), the peers'
        ``work_dir`` and ``cleanup_temp_files`` kept on the adapter."""
        options, peer = peer_options(owner, options)
        made = make_executor(owner, executor, backend, options)
        self._work_dir = peer.work_dir
        self._cleanup = peer.cleanup
        return made

    def _result_fields(
        self, executor: Executor, blocks: list[CodeBlock], result: ExecutionResult
    ) -> dict[str, Any]:
        """The fields of the peers' code result for a run (its code files
        removed first where the adapter cleans up): ``exit_code``,
        ``output``, ``code_file``, ``output_files`` and ``execution``."""
        if self._cleanup:
            remove_code_files(executor, blocks, result)
        return {
            "exit_code": result.exit_code,
            "output": result.to_text("plain"),
            "code_file": code_file(executor, result),
            "output_files": output_files(executor, result),
            "execution": result,
        }

    @property
    def timeout(self) -> float:
        """Seconds a block may run (``executor.limits.timeout_s``)."""
        return self._wrapped().limits.timeout_s

    @property
    def work_dir(self) -> Path:
        """The workspace folder: ``work_dir`` as given, else its absolute path."""
        return self._work_dir if self._work_dir is not None else self._wrapped().workspace.path

    @property
    def bind_dir(self) -> Path:
        """The host folder the blocks' workspace is (AutoGen's docker
        executor binds it into the container; execbox's docker backend binds
        the workspace at /workspace)."""
        return self._wrapped().workspace.path

    @property
    def functions_module(self) -> str:
        """The module the blocks import the executor's ``functions=`` from."""
        functions = getattr(self._wrapped(), "functions", None)
        return functions.module if functions is not None else "functions"

    def format_functions_for_prompt(self) -> str:
        """Text that tells a model which functions it can import (empty: none),
        each signature and docstring ending in a newline, as the peers'."""
        prompt = str(getattr(self._wrapped(), "functions_prompt", ""))
        return prompt + "\n" if prompt else ""


def warn_stateless_restart(owner: str, executor: Executor) -> None:
    """Warn, as AG2's and AutoGen's local executors do, that restarting a
    backend whose blocks keep no state between them does nothing beyond
    stopping what still runs."""
    if not executor.capabilities.stateful:
        warnings.warn(
            f"{owner}.restart(): the {executor.name} backend keeps no state between blocks (each runs "
            "in a new process), so there is nothing to restart: blocks still running were stopped. "
            "No action is taken beyond that.",
            UserWarning,
            stacklevel=3,
        )
