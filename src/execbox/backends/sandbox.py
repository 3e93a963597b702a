"""The sandbox backend: each block in a bubblewrap jail.

A user namespace even when the host user is root (uid/gid 65534 inside, every
capability dropped), new PID/IPC/UTS/network/cgroup namespaces, a read-only
root made of read-only binds of the system and interpreter directories only
(no home directories, no host /tmp), a private size-capped /tmp, the workspace
as the only writable host path, a private /proc, no network unless
``Limits(network=True)``, an environment built from nothing.

This is the one-shot form (a jail per block). cgroup limits (processes,
memory accounting), seccomp and the warm pool are not here yet.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from .._errors import BackendUnavailableError
from .._languages import runnable_languages
from .._process import TOKEN_VAR
from ._base import Capabilities
from .local import LocalExecutor

__all__ = ["SandboxExecutor", "find_bwrap"]

SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC_FILES = (
    "/etc/alternatives", "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
    "/etc/ssl", "/etc/ca-certificates", "/etc/mime.types", "/etc/nsswitch.conf", "/etc/os-release",
    "/etc/matplotlibrc", "/etc/fonts",
)
NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/host.conf", "/etc/gai.conf")
INSIDE_PATH = "/usr/local/bin:/usr/bin:/bin"
NOBODY = "65534"
INSTALL_HINT = ("install bubblewrap (apt-get install bubblewrap), or use backend='local' to run "
                "unisolated")


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


class SandboxExecutor(LocalExecutor):
    """Run blocks in a bubblewrap jail (see the module docstring).

    Takes every option of ``LocalExecutor`` (``inherit_env`` passes the host's
    variables into the jail, so leave it off), plus ``tmp_size_mb`` for the
    private /tmp and ``hostname``.
    """

    name = "sandbox"

    def __init__(self, *, tmp_size_mb: int = 256, hostname: str = "execbox", **options: Any) -> None:
        super().__init__(**options)
        self.tmp_size_mb = tmp_size_mb
        self.hostname = hostname
        self._prefix: list[str] = []

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(backend=self.name, isolated=True, stateful=False,
                            enforced=frozenset({"timeout_s", "max_output_bytes", "memory_mb", "network"}),
                            languages=runnable_languages(INSIDE_PATH))

    def _start(self) -> None:
        bwrap = find_bwrap()
        if bwrap is None:
            raise BackendUnavailableError(self.name, f"bubblewrap (bwrap) is not installed: {INSTALL_HINT}")
        super()._start()
        assert self._python is not None
        readonly = _interpreter_dirs(self._python)
        self._prefix = [bwrap, *_jail_args(readonly, network=bool(self.limits.network),
                                           tmp_bytes=self.tmp_size_mb * 1024 * 1024,
                                           hostname=self.hostname, workspace=str(self.workspace.path))]
        probe = subprocess.run([*self._prefix, "--", "/bin/true"], capture_output=True, text=True, timeout=30)
        if probe.returncode != 0:
            raise BackendUnavailableError(
                self.name,
                f"bubblewrap could not create a sandbox here ({probe.stderr.strip() or probe.returncode}): "
                "user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone=1, "
                "user.max_user_namespaces > 0); use backend='local' to run unisolated",
            )

    def _wrap(self, argv: list[str], token: str) -> tuple[list[str], dict[str, str]]:
        inside = dict(self._child_env)
        for name in ("USER", "LOGNAME"):
            inside.pop(name, None)
        inside.update({"HOME": "/tmp", "TMPDIR": "/tmp", TOKEN_VAR: token,
                       "PATH": f"{self.environment.bin_dir(self._python or '')}:{INSIDE_PATH}"})
        inside.update(self.env)
        setenv: list[str] = []
        for key, value in inside.items():
            setenv += ["--setenv", key, value]
        return [*self._prefix, *setenv, "--", *argv], {"PATH": INSIDE_PATH, "LANG": "C.UTF-8"}


def _jail_args(readonly: Sequence[str], *, network: bool, tmp_bytes: int, hostname: str,
               workspace: str) -> list[str]:
    args = ["--unshare-all", "--unshare-user", "--uid", NOBODY, "--gid", NOBODY, "--cap-drop", "ALL",
            "--die-with-parent", "--new-session", "--clearenv", "--hostname", hostname]
    if network:
        args.append("--share-net")
    for path in SYSTEM_DIRS:
        if os.path.islink(path):  # /bin -> usr/bin on merged-/usr systems
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in (*ETC_FILES, *(NETWORK_FILES if network else ())):
        args += ["--ro-bind-try", path, path]
    # /tmp before the interpreter binds: an interpreter (a venv) may live under the host's /tmp
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    for path in readonly:
        args += ["--ro-bind", path, path]
    args += ["--bind", workspace, workspace, "--chdir", workspace, "--remount-ro", "/"]
    return args


def _interpreter_dirs(python: str) -> list[str]:
    """Directories the interpreter needs that the system binds do not cover:
    its prefixes (a venv and its base), resolved through symlinks."""
    script = "import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix]))"
    done = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise BackendUnavailableError("sandbox", f"cannot run the interpreter {python}: {done.stderr.strip()}")
    found: list[str] = []
    for path in [*json.loads(done.stdout), os.path.dirname(os.path.realpath(python))]:
        for candidate in (path, os.path.realpath(path)):
            if any(candidate == d or candidate.startswith(d + "/") for d in SYSTEM_DIRS):
                continue
            if os.path.isdir(candidate) and candidate not in found:
                found.append(candidate)
    # a parent bound first, then its children would be redundant
    return [p for p in found if not any(p != q and p.startswith(q + "/") for q in found)]
