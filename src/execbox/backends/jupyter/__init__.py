"""The Jupyter backend: stateful blocks in a kernel (variables, imports and
loaded data stay between blocks until ``restart()``).

Where the kernel runs is chosen with ``kernel``: ``"sandbox"`` (the default
where bubblewrap works: ipykernel in the sandbox's jail, ``_sandboxed``),
``"local"`` (a plain kernel process, ``_kernel``), or a Jupyter Kernel Gateway
(``JupyterConnectionInfo`` or ``LocalJupyterServer``, ``_gateway``). How a
cell is run does not depend on it (``_cell`` over ``_channels``). Python
blocks run as cells; ``sh`` / ``bash`` blocks
run as a subprocess of the kernel with their output streamed into the cell.
A timeout or a cancel interrupts the kernel and keeps its state; if the
interrupt does not take within a few seconds, the kernel is restarted and
the result says the state was lost. A kernel that dies is noticed within
50 ms, restarted, and reported. A kernel found dead or stopped before a
block (a thread of an earlier one did it), or that takes nothing of a cell
within ``_cell.ANSWER_S``, is restarted and the block runs in the new one
(a second that does not answer: ``StallError``); one stopped while a cell
runs is restarted after ANSWER_S, and the block reported. Processes a
block starts are killed when it ends, like every backend. Calls to one
kernel are serialized.
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

from ..._errors import ConfigurationError, StallError
from ..._gpus import grant, parse_gpus
from ..._languages import Language, Policy, resolve_program
from ..._models import DEFAULT_FILE_SIZE_MB, DEFAULT_OPEN_FILES, ErrorInfo, Limits
from ..._progress import OnProgress, Progress, check_on_progress, reporting
from ..._workspace import INTERNAL_DIR, Workspace
from ...environments import Environment, SystemPython
from ...jail import (
    INSIDE_PATH,
    cgroup_support,
    inside_environment,
    jail_rlimits,
    policy_for,
)
from .._base import Executor
from .._executor_api import Capabilities
from .._host import child_environment
from .._host_python import HostPython
from .._output import Capture
from .._ownership import hand_over
from .._process import TOKEN_VAR, Cancellation, OutputCallback, new_token
from .._result import Outcome
from ._cell import ANSWER_S, CellOutcome, cell_outcome, run_cell
from ._channels import Channels, ChannelStalled, execute
from ._display_files import DisplayFiles
from ._docker_server import DockerJupyterServer
from ._gateway import GatewayKernel, JupyterConnectionInfo
from ._kernel import LocalKernel
from ._kernel_base import Kernel
from ._kernel_choice import default_kernel
from ._kernel_setup import setup_code, shell_code
from ._recovery import revive, settle
from ._sandboxed import SandboxKernel
from ._servers import LocalJupyterServer
from ._warm import warm_pool

__all__ = ["DockerJupyterServer", "JupyterConnectionInfo", "JupyterExecutor", "LocalJupyterServer"]

# Kernel Gateways execbox starts: each has a ``connection_info``.
SERVERS = (LocalJupyterServer, DockerJupyterServer)


class JupyterExecutor(HostPython, Executor):
    """Run blocks in a Jupyter kernel that keeps state between them.

    - ``environment``: the Python whose ipykernel runs (``SystemPython()`` by
      default; a ``Venv(packages=["ipykernel", ...])`` works too).
    - ``kernel``: where the kernel runs. ``"sandbox"``: inside the sandbox
      backend's jail (no network unless ``Limits(network=True)``, the
      workspace the only writable host path, memory/process/CPU limits by
      cgroup); the default where bubblewrap works, else ``"local"`` with a
      warning. ``"local"``: a plain process of this user.
      A ``JupyterConnectionInfo`` (a Kernel Gateway anywhere) or a
      ``LocalJupyterServer`` (started here if it is not running): a kernel
      of this executor's own on that server.
    - ``kernel_name``: another installed kernel spec (local or gateway kernels).
    - ``env``: extra environment variables of the kernel.
    - ``warm_kernels`` (1): kernels of this configuration kept started ahead
      of demand, for executors made without a ``workspace`` (a warm kernel
      comes with the temporary workspace it was started in). The first such
      executor starts its own kernel and the warm ones are started behind it;
      later ones run their first block at once. Local and sandboxed kernels
      of the default environment only; 0 turns it off. (Formerly
      ``pool_size``, still taken with a ``DeprecationWarning``: the
      sandbox's ``pool_size`` is something else, its pre-forked units.)
    - ``output_dir``: where the image and HTML files of displays are saved
      (default: ``outputs/`` in the workspace; a relative path is from the
      current directory, as AG2's; see ``_display_files``).
    - ``silence_pip`` (True): ``!pip install`` / ``%pip install`` get
      ``-qqq``, as AG2's Jupyter executor does.
    - ``keep_code_files`` (True): False removes a block's code file once it
      has run (a named block's file is kept).
    - ``on_progress``: gets the steps of the start (the environment made
      ready, the kernel started): a callable taking each step's text;
      default: a spinner on a terminal, ``execbox`` log lines otherwise;
      False: nothing.
    - ``gpus``: NVIDIA GPUs the jailed kernel may use ("all", indices or
      UUIDs, ``execbox._gpus``): their nodes bound into its jail, as the
      sandbox does (``kernel="sandbox"`` only).
    """

    name = "jupyter"
    language_scope = (
        frozenset({"python", "sh", "bash"}),
        "it runs Python in its kernel, and sh/bash blocks as the kernel's subprocesses",
    )
    _environment: Environment  # always one (HostPython's), never Executor's None

    def __init__(
        self,
        *,
        workspace: Workspace | str | os.PathLike[str] | None = None,
        limits: Limits | None = None,
        environment: Environment | None = None,
        kernel: str | JupyterConnectionInfo | LocalJupyterServer | DockerJupyterServer | None = None,
        kernel_name: str | None = None,
        env: Mapping[str, str] | None = None,
        execution_policies: Mapping[str, Policy | bool] | None = None,
        on_progress: OnProgress = None,
        warm_kernels: int = 1,
        output_dir: str | os.PathLike[str] | None = None,
        silence_pip: bool = True,
        keep_code_files: bool = True,
        pool_size: int | None = None,
        gpus: Any = None,
    ) -> None:
        super().__init__(
            workspace=workspace,
            limits=limits,
            execution_policies=execution_policies,
            silence_pip=silence_pip,
            keep_code_files=keep_code_files,
        )
        warm_kernels = _warm_kernels(warm_kernels, pool_size)
        _check_kernel(kernel, kernel_name)
        self._environment = environment or SystemPython()
        self.gpus = parse_gpus(gpus)
        self.kernel = kernel or ("local" if kernel_name else default_kernel())
        _check_gpus(self.gpus, kernel, self.kernel)
        # a jailed kernel sees .execbox/ read-only (``_sandboxed``): runs need not walk it for set-ID bits
        self._blocks_write_internal = self.kernel != "sandbox"
        self.kernel_name = kernel_name
        self.env = dict(env or {})
        self._progress = check_on_progress(on_progress, "JupyterExecutor")
        self._kernel: Kernel | None = None
        self._cell_lock = threading.Lock()
        self._child_env: dict[str, str] = {}
        self._token = new_token()  # marks the kernel and what blocks start, to kill the latter
        defaults = workspace is None and environment is None and kernel_name is None and self.gpus is None
        if defaults and warm_kernels and self.kernel in ("sandbox", "local"):
            self._adopt_a_warm_kernel(warm_kernels)
        self.display_files = DisplayFiles(self.workspace, output_dir)  # the workspace adopted, if one was

    def _adopt_a_warm_kernel(self, warm_kernels: int) -> None:
        """Take a started kernel of this configuration from the warm pool, if
        one is ready, and have ``warm_kernels`` started behind it."""
        key = ("jupyter", self.kernel, self.limits, tuple(sorted(self.env.items())))
        options = dict(
            limits=self.limits, kernel=self.kernel, env=self.env, warm_kernels=0, on_progress=False
        )
        donor = warm_pool(key, lambda: _started(options), _close, warm_kernels).take()
        if donor is not None:
            self._adopt(donor)

    def _adopt(self, donor: JupyterExecutor) -> None:
        """Take over a pooled executor's started kernel and its workspace."""
        self.workspace.close()  # ours, temporary and still empty
        self.workspace, self._owns_workspace = donor.workspace, True
        self._token, self._child_env, self._kernel = donor._token, donor._child_env, donor._kernel
        donor._kernel, donor._owns_workspace = None, False
        donor.close()
        self._started = True

    def can_add_libraries(self) -> str | None:
        return (
            "the jupyter backend keeps one kernel whose environment execbox does not change: preinstall "
            "them (JupyterExecutor(environment=Venv(packages=['ipykernel', ...])))."
        )

    @property
    def capabilities(self) -> Capabilities:
        sandboxed = self.kernel == "sandbox"
        path = INSIDE_PATH if sandboxed else self._child_env.get("PATH") or os.environ.get("PATH", "")
        shells = tuple(s for s in ("sh", "bash") if resolve_program(s, path))
        enforced = {"timeout_s", "max_output_bytes"}
        if sandboxed:
            enforced |= {"network"} | (
                {"memory_mb", "max_processes", "cpus"} if cgroup_support()[0] else set()
            )
        return Capabilities(
            backend=self.name,
            isolated=sandboxed,
            stateful=True,
            enforced=frozenset(enforced),
            languages=("python", *shells),
        )

    def _start(self) -> None:
        with reporting(self._progress) as progress:
            self._start_kernel(progress)

    def _start_kernel(self, progress: Progress) -> None:
        python = self.environment.prepare(progress)
        env = child_environment(
            bin_dir=self.environment.bin_dir(python),
            extra=self.environment.variables(python),
            user={},
            inherit=False,
        )
        env.pop("MPLBACKEND", None)  # the kernel's inline backend turns plots into images
        env.update(self.env)
        env[TOKEN_VAR] = self._token
        self._child_env = env
        kernel = self._new_kernel(python)
        progress(f"starting {_kernel_words(self.kernel)}")
        kernel.start()
        execute(_started_channels(kernel), self._setup_code(kernel), silent=True)
        self._kernel = kernel

    def _setup_code(self, kernel: Kernel) -> str:
        shares = (
            isinstance(kernel, GatewayKernel) and kernel.shares_files
        )  # a server's kernel starts in its folder
        return setup_code(
            self.limits.max_output_bytes + (64 << 10), str(self.workspace.path) if shares else None
        )

    def _new_kernel(self, python: str) -> Kernel:
        cwd = str(self.workspace.path)
        if isinstance(self.kernel, (JupyterConnectionInfo, *SERVERS)):
            info = (
                self.kernel if isinstance(self.kernel, JupyterConnectionInfo) else self.kernel.connection_info
            )
            return GatewayKernel(info, kernel_name=self.kernel_name, env=self.env, token=self._token)
        if self.kernel == "local":
            return LocalKernel(python=python, cwd=cwd, env=self._child_env, kernel_name=self.kernel_name)
        inside = inside_environment(self._child_env, self.environment.bin_dir(python), self.env)
        policy = policy_for(  # the sandbox's blocks' jail, with the sandbox's default options
            self.limits,
            workspace=cwd,
            env=inside,
            rlimits=jail_rlimits(DEFAULT_OPEN_FILES, DEFAULT_FILE_SIZE_MB),  # memory: the kernel's cgroup
            gpu=grant(self.gpus, backend=self.name) if self.gpus is not None else None,
        )
        return SandboxKernel(python=python, policy=policy, cgroups=cgroup_support()[0])

    def _stop(self) -> None:
        with self._cell_lock:  # a running cell (cancelled by now) finishes first
            if self._kernel is not None:
                self._kernel.stop()
                self._kernel = None

    def give_to_blocks(self, paths: Iterable[str]) -> None:
        kernel = self._kernel  # no lock: an upload must not wait for a running cell
        if kernel is not None:
            self._give(kernel, list(paths))

    def _give(self, kernel: Kernel, paths: list[str]) -> None:
        """A jailed kernel's identity gets the paths (a local or remote kernel needs nothing)."""
        jail = kernel.jail_id
        if jail is not None:
            hand_over(str(self.workspace.path), *jail, paths)

    def _execute(
        self, language: Language, code_path: str, cancel: Cancellation, on_output: OutputCallback | None
    ) -> Outcome:
        """A code file given by its path alone (blocks come with their text: ``_execute_code``)."""
        path = os.path.normpath(code_path)  # read refusing links and FIFOs
        read = (
            self.workspace.read_internal
            if path.startswith(INTERNAL_DIR + os.sep)
            else self.workspace.download
        )
        return self._execute_code(
            language, code_path, read(path).decode("utf-8", "replace"), cancel, on_output
        )

    def _execute_code(
        self,
        language: Language,
        code_path: str,
        code: str,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        stdin: str | None = None,  # never given: a kernel takes no stdin (takes_stdin)
        *,
        from_text: bool = False,  # never True: a kernel always takes the text (_runs_from_text)
    ) -> Outcome:
        # ``code``, not the file read back: a thread left by an earlier cell may
        # have swapped the file for a link to a host file, or a FIFO, meanwhile
        expressions: dict[str, str] = {}
        if language.name != "python":
            # the block's file where the kernel sees our files, else its text
            shared = not isinstance(self._kernel, GatewayKernel) or self._kernel.shares_files
            argv = [language.name, code_path] if shared else [language.name, "-c", code]
            code = shell_code(argv)
            expressions = {"rc": "__execbox_rc"}
        with self._cell_lock:
            kernel = self._kernel
            if kernel is None:  # a restart stopped the kernel after this block's cancel check
                return Outcome(
                    status="cancelled",
                    exit_code=130,
                    output="Cancelled: the executor was restarted.\n",
                    stdout="",
                    stderr="",
                    duration_s=0.0,
                    error=ErrorInfo("Cancelled", "the executor was restarted before the block ran"),
                )
            if not code_path.startswith(INTERNAL_DIR + "/"):
                # a named block's folders, made by execbox (root), are the jail's to write in
                self._give(kernel, [code_path])
            try:
                notes = [revive(kernel)]
                for attempt in (1, 2):
                    outcome = self._cell(kernel, code, code_path, expressions, cancel, on_output)
                    if outcome.status != "stalled" or outcome.answered:
                        break
                    kernel.restart()  # it took nothing of the cell: the cell runs in a new kernel
                    if attempt == 2:
                        raise StallError(
                            f"jupyter: a new kernel did not answer either ({outcome.error})",
                            waiting_for="the Jupyter kernel's answer",
                        )
                    notes.append(
                        f"The kernel did not answer for {ANSWER_S:.0f} s (stopped?): it was restarted and "
                        "this block ran in the new one; variables and imports of earlier blocks are lost."
                    )
                notes.append(settle(kernel, outcome, self.limits.effective_memory_mb()))
            finally:
                kernel.kill_strays()  # no process a block started outlives it, whatever happened
        return cell_outcome(outcome, " ".join(n for n in notes if n), self.limits)

    def _cell(
        self,
        kernel: Kernel,
        code: str,
        code_path: str,
        expressions: dict[str, str],
        cancel: Cancellation,
        on_output: OutputCallback | None,
    ) -> CellOutcome:
        """The cell run (after a restart, the kernel's set-up first); a send
        the kernel does not take: stalled."""
        try:
            if kernel.restarted:
                execute(_started_channels(kernel), self._setup_code(kernel), silent=True)
                kernel.restarted = False
            if "__file__" in code:  # the block's file, as a file run would say (costs a kernel round)
                execute(
                    _started_channels(kernel),
                    f"__file__ = {str(self.workspace.path / code_path)!r}",
                    silent=True,
                )
            return run_cell(
                kernel,
                code,
                deadline=time.monotonic() + self.limits.timeout_s,
                output_limit=self.limits.max_output_bytes,
                cancel=cancel,
                on_output=on_output,
                save=self.display_files.save,
                prefix=os.path.basename(code_path).rsplit(".", 1)[0],
                user_expressions=expressions,
            )
        except ChannelStalled as exc:
            return CellOutcome(
                "stalled", Capture(self.limits.max_output_bytes), ErrorInfo("KernelStalled", str(exc))
            )


def _warm_kernels(warm_kernels: int, pool_size: int | None) -> int:
    """``warm_kernels``, checked; the old ``pool_size`` taken for it with a warning."""
    if pool_size is not None:
        warnings.warn(
            "JupyterExecutor(pool_size=...) is now warm_kernels=... (kernels started ahead of "
            "demand); pool_size will be removed",
            DeprecationWarning,
            stacklevel=3,  # the caller of JupyterExecutor()
        )
        warm_kernels = pool_size
    if not isinstance(warm_kernels, int) or warm_kernels < 0:
        raise ConfigurationError(
            f"JupyterExecutor(warm_kernels={warm_kernels!r}) must be a whole number >= 0"
        )
    return warm_kernels


def _check_kernel(kernel: object, kernel_name: str | None) -> None:
    if not isinstance(kernel, (JupyterConnectionInfo, *SERVERS)) and kernel not in (None, "sandbox", "local"):
        raise ConfigurationError(
            f"JupyterExecutor(kernel={kernel!r}): use 'sandbox', 'local', "
            "a JupyterConnectionInfo, a LocalJupyterServer or a DockerJupyterServer"
        )
    if kernel_name and kernel == "sandbox":
        raise ConfigurationError("kernel_name=... picks a local kernel spec: use kernel='local' with it")


def _check_gpus(gpus: object, asked: object, kernel: object) -> None:
    """GPUs go into the jailed kernel alone: ``asked`` is the kernel given,
    ``kernel`` the one picked."""
    if gpus is None:
        return
    if asked not in (None, "sandbox"):
        raise ConfigurationError(
            "JupyterExecutor(gpus=...) binds GPUs into the jailed kernel: use kernel='sandbox' "
            "(a local kernel already sees this host's GPUs; a gateway's are its host's)"
        )
    if kernel != "sandbox":
        raise ConfigurationError(
            "JupyterExecutor(gpus=...) needs the jailed kernel, which cannot start here "
            "(bubblewrap is missing): see `execbox doctor`"
        )


def _kernel_words(kernel: str | JupyterConnectionInfo | LocalJupyterServer | DockerJupyterServer) -> str:
    """What starting a kernel of ``JupyterExecutor(kernel=...)`` is, in words (no token)."""
    if isinstance(kernel, str):
        return f"a {'jailed' if kernel == 'sandbox' else 'local'} Jupyter kernel"
    info = kernel if isinstance(kernel, JupyterConnectionInfo) else kernel.connection_info
    return f"a Jupyter kernel on the gateway at {info.base_url}"


def _started(options: dict[str, Any]) -> JupyterExecutor:
    executor = JupyterExecutor(**options)
    executor.start()
    return executor


def _close(executor: JupyterExecutor) -> None:
    executor.close()


def _started_channels(kernel: Kernel) -> Channels:
    """A started kernel's channels (a stopped one has none)."""
    assert kernel.channels is not None, "the kernel is not started"
    return kernel.channels
