"""How a sandbox block's argv runs: the sandbox executor's ``BlockRunner``.

One of three, fixed when the executor starts: a box of the warm pool
(``_pool``), a one-shot bubblewrap jail per block (the ``JailPolicy``
through ``_launcher``), or the Landlock tier (``_landlock_tier``). Each
block gets a cgroup where the host allows one (a pool box's, counted per block); a block killed
for memory says so.
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..._languages import Language
from ...jail import (
    INSIDE_PATH,
    BlockCgroup,
    BlockCounts,
    GpuWatcher,
    Jailer,
    JailPolicy,
    by_name,
    no_watch,
    prepare,
)
from .._host import ProcessRunner, with_options
from .._process import TOKEN_VAR, Cancellation, OutputCallback, ProcessOutcome, new_token, run_process
from ._landlock_tier import LandlockTier
from ._pool import ZygotePool
from ._session import sent_whole

__all__ = ["ONE_SHOT_OVERHEAD", "JailRunner", "prlimit"]

# processes of ours inside a one-shot block's cgroup: bwrap and its init
# (a pool box's init stays outside the box's cgroup)
ONE_SHOT_OVERHEAD = 2


@functools.cache
def _data_for_address(rlimits: tuple[tuple[str, int], ...]) -> tuple[tuple[str, int], ...]:
    """``rlimits`` with RLIMIT_DATA in place of RLIMIT_AS: a memory bound a runtime's reservations
    (a JVM's, Node.js's, Go's) do not count against."""
    return tuple(("DATA" if name == "AS" else name, value) for name, value in rlimits)


def prlimit() -> str | None:
    """util-linux's prlimit, as the jail sees it (it binds /usr)."""
    return shutil.which("prlimit", path=INSIDE_PATH)


class JailRunner(ProcessRunner):
    """Runs blocks in the executor's jails (the module docstring); what it
    is handed (the pool, the Landlock tier, the namespace, the jail id)
    belongs to the executor, which stops it."""

    def __init__(
        self,
        policy: JailPolicy,
        *,
        timeout_s: float,
        output_limit: int,
        python: str,
        make_cgroup: Callable[[], BlockCgroup | None],
        bwrap: str = "",
        jailer: Jailer | None = None,
        netns: int | None = None,
        userns: int | None = None,
        zygote: ZygotePool | None = None,
        landlock: LandlockTier | None = None,
        gpu_watch: GpuWatcher = no_watch,
    ) -> None:
        self.policy = policy
        self.timeout_s = timeout_s
        self.output_limit = output_limit
        self.python = python
        self.make_cgroup = make_cgroup
        self.bwrap = bwrap
        self.jailer = jailer or Jailer(None, ())
        self.netns = netns
        self.userns = userns  # joined before netns (the egress one's, for a host user who is not root)
        self.zygote = zygote
        self.landlock = landlock
        self.gpu_watch = gpu_watch  # Limits.gpu_memory_mb, on the blocks of a GPU executor (_gpu)

    def runs_from_text(self, language: Language, code: str) -> bool:
        # the pool's code process takes a Python block's text in its request
        return self.zygote is not None and language.python_script and sent_whole(code)

    def run(
        self,
        argv: list[str],
        *,
        python_file: bool,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,
        stdin: bytes | None = None,
        reserves: tuple[str, ...] | None = None,
    ) -> ProcessOutcome:
        if reserves is not None and "AS" in dict(self.policy.rlimits):
            # Node.js, a JVM, Go: RLIMIT_AS (no memory cgroup here) stops them at start; RLIMIT_DATA
            # holds the limit in its place, in a jail of its own (a pool unit's rlimits are set)
            policy = replace(self.policy, rlimits=_data_for_address(self.policy.rlimits))
            outcome = self._run(
                with_options(argv, reserves),
                python_file=False,
                cancel=cancel,
                on_output=on_output,
                stdin=stdin,
                policy=policy,
            )
            outcome.address_space_mb, outcome.memory_rlimit = self.policy.memory_mb or 0, "RLIMIT_DATA"
            return outcome
        return self._run(
            argv, python_file=python_file, cancel=cancel, on_output=on_output, source=source, stdin=stdin
        )

    def build(
        self,
        argv: list[str],
        *,
        folders: tuple[str, ...],
        env: dict[str, str],
        timeout_s: float,
        cancel: Cancellation,
    ) -> ProcessOutcome:
        """Run a compiler: in a jail of its own (never a pool unit, whose
        mounts are fixed), under the blocks' limits but ``timeout_s``, with
        the workspace-relative ``folders`` writable inside the sealed
        .execbox/ (the build's, the language's cache) and ``env`` added."""
        policy = replace(
            self.policy,
            unsealed=folders,
            env=(*self.policy.env, *env.items()),
            # RLIMIT_DATA, not AS, standing in for a memory cgroup: javac's JVM and tsc's Node.js
            # reserve far more address space than they use, which DATA does not count
            rlimits=_data_for_address(self.policy.rlimits),
        )
        return self._run(
            argv,
            python_file=False,
            cancel=cancel,
            on_output=None,
            policy=policy,
            timeout_s=timeout_s,
            env=env,
        )

    def _run(
        self,
        argv: list[str],
        *,
        python_file: bool,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        source: str | None = None,
        stdin: bytes | None = None,
        policy: JailPolicy | None = None,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
    ) -> ProcessOutcome:
        group: BlockCgroup | BlockCounts | None = None
        output_limit = self.output_limit
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        try:
            if self.zygote is not None and policy is None:
                request: dict[str, Any] = {"argv": argv, "inproc": python_file}  # env, cwd: the zygote's
                if source is not None and python_file:  # run from its text: its file is not read
                    request["code"] = source
                outcome, group = self.zygote.run(
                    request,
                    timeout_s=timeout_s,
                    output_limit=output_limit,
                    cancel=cancel,
                    on_output=on_output,
                    stdin=stdin,
                )
            else:
                group = self.make_cgroup()
                with self.gpu_watch(group) as gpu:
                    outcome = (
                        self.landlock.run(
                            argv,
                            group,
                            timeout_s=timeout_s,
                            output_limit=output_limit,
                            cancel=cancel,
                            on_output=on_output,
                            stdin=stdin,
                            extra_env=env,
                            address_limit=policy is None,
                        )
                        if self.landlock is not None
                        else self._one_shot(
                            argv, group, cancel, on_output, policy or self.policy, timeout_s, stdin
                        )
                    )
                if gpu is not None and gpu.exceeded:
                    outcome.gpu_memory_exceeded_mb = gpu.limit_mb
            memory_mb = self.policy.memory_mb or 0
            if group is not None and outcome.exit_code != 0 and group.oom_killed():
                outcome.memory_exceeded_mb = memory_mb
            if "AS" in dict((policy or self.policy).rlimits):  # no memory cgroup: the address space stood in
                outcome.address_space_mb = memory_mb
            if group is not None:
                outcome.peak_memory_mb = group.peak_memory_mb()
            return outcome
        finally:
            if group is not None:
                group.remove()

    def _one_shot(
        self,
        argv: list[str],
        group: BlockCgroup | None,
        cancel: Cancellation,
        on_output: OutputCallback | None,
        policy: JailPolicy,
        timeout_s: float,
        stdin: bytes | None,
    ) -> ProcessOutcome:
        token = new_token()
        # RLIMIT_NPROC inside the jail's user namespace (the pool sets it in each unit):
        # the jail's init and the block's processes count there
        processes = policy.max_processes
        nproc = (
            [found, f"--nproc={processes + 1}", "--"]
            if processes is not None and (found := prlimit())
            else []
        )
        if argv and argv[0] == self.python:  # by its bare name: no host folder in the jail's argvs
            argv = [by_name(argv[0], dict(policy.env).get("PATH", "")), *argv[1:]]
        launch = prepare(
            self.bwrap,
            policy,
            [*nproc, *argv],
            jailer=self.jailer,
            group=group,
            netns=self.netns,
            userns=self.userns,
            env={TOKEN_VAR: token},
        )
        try:
            return run_process(
                launch.argv,
                cwd=policy.workspace,
                env={"PATH": INSIDE_PATH, "LANG": "C.UTF-8"},
                timeout_s=timeout_s,
                output_limit=self.output_limit,
                cancel=cancel,
                on_output=on_output,
                token=token,
                preexec=launch.preexec,
                pass_fds=launch.pass_fds,
                also_kill=group.kill if group is not None else None,
                stdin=stdin,
            )
        finally:
            launch.close()
