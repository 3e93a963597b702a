"""Where a Jupyter kernel runs: ipykernel inside the sandbox backend's
bubblewrap jail. Stateful like a local kernel, isolated like a sandbox block.

- The jail is the sandbox's (a ``JailPolicy`` started by the kit's ``_launcher.prepare``):
  read-only system and interpreter, the workspace as the only writable host path, a private /tmp,
  no network unless ``Limits(network=True)``, and then a namespace of the kernel's own whose way
  out reaches the internet and not this machine (``jail._egress``), the seccomp filter, rlimits.
- The kernel talks over IPC sockets in a private host folder bound into the
  jail at a neutral path (``KERNEL_DIR``); bwrap reads its options from a
  memfd (``hidden_argv``) and the kernel starts by its bare name, so no
  argv in the jail's /proc names a host path; the connection file (its key)
  is removed once the kernel has read it. A signal from the host cannot
  reach into the jail's PID namespace cleanly, so interrupts go as
  messages on the control channel.
- JPY_PARENT_PID is not passed (the host's pid means nothing inside the
  jail, and ipykernel would exit at once); bwrap's --die-with-parent ends the
  jail with the host instead, started from a thread that lives as long as the
  process (``spawn_kept``).
- ``sealed`` folders of the workspace are bound read-only over themselves
  (``.execbox/``, the blocks' code files: no cell can leave a set-ID
  program there, so runs need not walk it; it grows by a file a block).
- The whole jail runs in one cgroup (memory, processes, CPU) when the host
  allows it: a kernel killed for memory is reported as such.
- When execbox runs as root, the jail is a host id leased for this kernel
  (``_identity``), which owns the workspace and the socket folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

from ..._errors import BackendUnavailableError
from ..._nofollow import open_folders
from ..._workspace import MAX_SCANNED_ENTRIES
from ...jail import (
    INSTALL_HINT,
    BlockCgroup,
    CgroupSupport,
    Egress,
    Jailer,
    JailPolicy,
    Launch,
    Lease,
    by_name,
    cgroup_maker,
    find_bwrap,
    interpreter_dirs,
    is_jail_id,
    lease,
    open_egress,
    prepare,
    reachable,
    spawn_kept,
)
from .._ownership import hand_over, reown_tree
from ._channels import ZmqChannels, wait_ready
from ._kernel import INSTALL_HINT as JUPYTER_HINT
from ._kernel import KERNEL_ARGS, READY_TIMEOUT_S, kernel_children, kernel_descendants, kill_pid
from ._kernel_base import Kernel

__all__ = ["SandboxKernel"]

# the kernel's sockets folder in the jail (a neutral name: its host path is the host's layout)
KERNEL_DIR = "/run/execbox"
# threads of ipykernel and the two bwrap processes count against a v1 pids limit
KERNEL_TASKS = 32


def _require_jupyter_client() -> None:
    try:
        import jupyter_client.connect  # noqa: F401 - only whether it is there
    except ImportError as exc:
        raise BackendUnavailableError("jupyter", f"jupyter_client is not installed: {JUPYTER_HINT}") from exc


class SandboxKernel(Kernel):
    """One jailed kernel and its channels. ``policy``: the jail (its
    workspace, environment, limits); the kernel adds the interpreter's
    folders and its sockets' folder."""

    def __init__(
        self,
        *,
        python: str,
        policy: JailPolicy,
        cgroups: CgroupSupport | None,
    ) -> None:
        self.python = python
        self.cwd = policy.workspace
        self.policy = policy
        self.cgroups = cgroups
        self.channels: ZmqChannels | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._group: BlockCgroup | None = None
        self._runtime = ""
        self._readonly: list[str] | None = None
        self._lease: Lease | None = None
        self._jailer = Jailer(None, ())
        self._egress: Egress | None = None  # Limits(network=True): the kernel's namespace

    def start(self) -> None:
        bwrap = find_bwrap()
        if bwrap is None:
            raise BackendUnavailableError("jupyter", f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        _require_jupyter_client()
        if self._readonly is None:
            self._readonly = interpreter_dirs(self.python)
        readonly = self._readonly
        connection, info = self._write_connection_file()
        self._lease = lease()
        if self._lease is not None:  # the jail's id owns its sockets' folder and the workspace
            uid, gid = self._lease.uid, self._lease.gid
            hand_over(self._runtime, uid, gid, ["kernel.json"])
            hand_over(self.cwd, uid, gid)
            reown_tree(self.cwd, uid, gid, is_jail_id, limit=MAX_SCANNED_ENTRIES)
        self._jailer = jailer = Jailer(self._lease, [*readonly, self.cwd, self._runtime])
        for folder in self.policy.sealed:  # bwrap binds only what exists
            os.close(open_folders(Path(self.cwd), tuple(folder.split("/")), folder, create=True, repair=True))
        policy = replace(self.policy, readonly=tuple(readonly), writable=((self._runtime, KERNEL_DIR),))
        self._group = cgroup_maker(self.cgroups, self.policy, KERNEL_TASKS)()
        # bwrap's options from a memfd and the kernel by a name on its PATH: the argv of bwrap (the jail's
        # PID 1) and of the kernel, which any cell reads in /proc, name no host path
        command = [
            by_name(self.python, dict(policy.env).get("PATH", "")),
            *KERNEL_ARGS,
            f"{KERNEL_DIR}/{os.path.basename(connection)}",
        ]
        netns = userns = None
        if policy.network:  # the internet, not this machine: a namespace of the kernel's own (_egress)
            self._egress = self._open_egress()
            policy = replace(policy, joined_netns=True, resolv_conf=self._egress.resolv_conf)
            netns, userns = self._egress.join()
        self._spawn(
            prepare(bwrap, policy, command, jailer=jailer, group=self._group, netns=netns, userns=userns)
        )
        self.channels = ZmqChannels(dict(info))
        try:
            self._wait_ready(self.channels, connection)
        except BaseException:
            self.stop()
            raise

    def _write_connection_file(self) -> tuple[str, dict[str, object]]:
        """The kernel's sockets' folder and its connection file: the path
        of the file, and the channels' info as the host reaches them."""
        from jupyter_client.connect import write_connection_file

        self._runtime = tempfile.mkdtemp(prefix="execbox-kernel-")
        # the kernel's connection file names the sockets by their path in the jail; the host's channels
        # reach the same sockets through the folder's host path
        connection, info = write_connection_file(
            os.path.join(self._runtime, "kernel.json"),
            transport="ipc",
            ip=f"{KERNEL_DIR}/ipc",
            key=os.urandom(32).hex().encode(),
        )
        return connection, {**info, "ip": os.path.join(self._runtime, "ipc")}

    def _open_egress(self) -> Egress:
        """The kernel's own network namespace, its way out reaching the
        internet and not this machine; stops what start made if it fails."""
        given = self._lease
        try:
            return open_egress(
                self._jailer.become,
                backend="jupyter",
                reachable_dir=lambda path: given is None or reachable(path, given.uid, given.gid),
            )
        except BaseException:
            self.stop()  # the lease, the cgroup, the sockets' folder
            raise

    def _spawn(self, launch: Launch) -> None:
        """bwrap and the kernel in it, their output to kernel.log."""
        log = open(os.path.join(self._runtime, "kernel.log"), "wb")  # noqa: SIM115 - the child's
        try:
            self._proc = spawn_kept(
                launch.argv,
                cwd=self.cwd,
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                preexec_fn=launch.preexec,
                pass_fds=launch.pass_fds,
            )
        finally:
            log.close()
            launch.close()

    def _wait_ready(self, channels: ZmqChannels, connection: str) -> None:
        """Until the kernel answers; then its connection file (its key) goes
        and its processes get their budget."""
        wait_ready(
            channels,
            self.alive,
            READY_TIMEOUT_S,
            lambda: (
                f"exit code {self.exit_code()}: {self._log_tail()} "
                f"Is ipykernel installed for {self.python}? {JUPYTER_HINT}"
            ),
        )
        os.unlink(connection)  # read: its key need not lie in a folder the jail can read
        self.pid = self._kernel_pid()
        self._budget_processes()

    def _budget_processes(self) -> None:
        """Blocks get ``max_processes`` on top of what the jail holds once
        the kernel is up (bwrap, its init and the kernel's threads), the
        kernel counting as the blocks' own interpreter."""
        s = self.policy
        if self._group is not None and s.max_processes:
            held = self._group.pids_current()
            self._group.set_limits(None, s.max_processes - 1 + held, None)

    def _kernel_pid(self) -> int | None:
        """bwrap, its init in the jail, then the kernel: the interpreter below both."""
        assert self._proc is not None
        for pid in kernel_descendants(self._proc.pid):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            if b"ipykernel_launcher" in argv[:3]:  # bwrap's own argv holds it further on
                return pid
        return None

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._runtime, "kernel.log"), "rb") as handle:
                return handle.read()[-2000:].decode("utf-8", "replace").strip()
        except OSError:
            return ""

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def memory_exceeded(self) -> bool:
        return self._group is not None and self._group.oom_killed()

    def interrupt(self) -> None:
        """As a message on the control channel (interrupt_mode "message")."""
        if self.channels is not None:
            self.channels.send("control", "interrupt_request", {})

    def kill_strays(self) -> None:
        """Every process in the jail but the kernel: what the last cell
        started, and orphans (reparented to the jail's init). Walks the
        children lists down from bwrap, not all of /proc."""
        if self._proc is None or self.pid is None:
            return
        keep = {self.pid, *kernel_children(self._proc.pid)}  # the kernel, and the jail's init above it
        for _ in range(5):  # a forking process may add more between two walks
            strays = [p for p in kernel_descendants(self._proc.pid) if p not in keep]
            if not strays:
                return
            for pid in strays:
                kill_pid(pid)

    def stop(self) -> None:
        if self.channels is not None:
            self.channels.close()
            self.channels = None
        if self._proc is not None:
            kill_pid(self._proc.pid)  # bwrap dies; --die-with-parent takes the jail with it
            if self._group is not None:
                self._group.kill()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None
        if self._group is not None:
            self._group.remove()
            self._group = None
        self.pid = None
        if self._runtime:
            shutil.rmtree(self._runtime, ignore_errors=True)
        if self._egress is not None:
            self._egress.close()
            self._egress = None
        self._jailer.close()
        if self._lease is not None:
            self._lease.release()
            self._lease = None

    @property
    def jail_id(self) -> tuple[int, int] | None:
        """The host uid and gid the kernel runs as (None: this user)."""
        return None if self._lease is None else (self._lease.uid, self._lease.gid)
