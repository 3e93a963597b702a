"""The one launcher: a ``JailPolicy`` and a command become what starts the
jail (bubblewrap's argv, the step its child takes before exec, the
descriptors it inherits).

The pool's zygote, the one-shot block and the jailed Jupyter kernel all
start through ``prepare``; the caller spawns (``run_process`` for a block
that ends, ``spawn_kept`` for a jail that lives on) and closes the
``Launch`` once the child holds its descriptors. What the child does
before bwrap (``Launch.preexec``, system calls only, in this order): join
the executor's network namespace (empty, or with the network on its egress
one, ``_egress``; a host user who is not root joins its user namespace
first), join the cgroup, set the policy's rlimits, close what it used,
become the jail's id (``Jailer.enter``). A policy with the network on starts
only in a namespace given: never in the host's.

bwrap reads its options from a memfd (``_jail.hidden_argv``): the jail's
PID 1 is bwrap, and its /proc/1/cmdline, which any block reads, would
name every host path bound, the environment and the limits.
"""

from __future__ import annotations

import os
import resource
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from ._cgroups import BlockCgroup
from ._identity import Jailer
from ._jail import CLONE_NEWNET, CLONE_NEWUSER, hidden_argv, setns_net, write_all
from ._policy import JailPolicy

__all__ = ["Launch", "prepare"]


@dataclass
class Launch:
    """What one jail starts with; ``close`` once the child is spawned."""

    argv: list[str]
    preexec: Callable[[], None]
    pass_fds: list[int]
    _owned: list[int] = field(default_factory=list, repr=False)

    def close(self) -> None:
        owned, self._owned = self._owned, []
        for fd in owned:
            os.close(fd)


def _pipe_holding(data: bytes) -> int:
    """The read end of a pipe holding ``data`` (for bwrap's ``--seccomp FD``)."""
    read, write = os.pipe()
    try:
        write_all(write, data)
    finally:
        os.close(write)
    return read


def prepare(
    bwrap: str,
    policy: JailPolicy,
    command: Sequence[str],
    *,
    jailer: Jailer,
    group: BlockCgroup | None = None,
    netns: int | None = None,
    userns: int | None = None,
    env: Mapping[str, str] | None = None,
    seccomp: bool = True,
    rlimits: bool = True,
) -> Launch:
    """The launch of ``command`` in a jail of ``policy``. ``group``: the
    cgroup the jail joins; ``netns``: the network namespace it joins
    (``policy.joined_netns``: the executor's empty one, or its egress one
    when ``policy.network``), ``userns``: the user namespace joined before
    it (the egress one's, for a host user who is not root); ``env``: variables of this launch only (a
    block's run token) on top of ``policy.env``; ``seccomp`` False: the
    program inside applies the policy's filter itself (the pool's zygote);
    ``rlimits`` False: neither are the policy's rlimits set before the jail
    (the zygote's units set them per block)."""
    if policy.joined_netns != (netns is not None):
        raise ValueError("JailPolicy(joined_netns=...) and the netns given must agree")
    if policy.network and netns is None:
        raise ValueError(
            "JailPolicy(network=True) starts in its executor's egress namespace (_egress.open_egress), "
            "given as netns: never in the host's network"
        )
    owned: list[int] = []
    try:
        options = policy.bwrap_options(jailer.source)
        for key, value in (env or {}).items():
            options += ["--setenv", key, value]
        program = policy.seccomp_program() if seccomp else None
        if program:
            owned.append(_pipe_holding(program))
            options += ["--seccomp", str(owned[-1])]
        cgroup_fds = group.open_procs() if group is not None else []
        owned += cgroup_fds
        argv, options_fd = hidden_argv(bwrap, options, command)
        owned.append(options_fd)
    except BaseException:
        for fd in owned:
            os.close(fd)
        raise
    limits = (
        [(getattr(resource, f"RLIMIT_{name}"), value) for name, value in policy.rlimits] if rlimits else []
    )
    namespaces = [fd for fd in (userns, netns) if fd is not None]
    used = (*cgroup_fds, *namespaces)
    return Launch(
        argv=argv,
        preexec=_enter(netns, userns, cgroup_fds, limits, used, jailer),
        pass_fds=[*owned, *namespaces],
        _owned=owned,
    )


def _enter(
    netns: int | None,
    userns: int | None,
    cgroup_fds: Sequence[int],
    limits: Sequence[tuple[int, int]],
    used: Iterable[int],
    jailer: Jailer,
) -> Callable[[], None]:
    used = tuple(used)

    def enter() -> None:  # in the child, before bwrap starts: system calls only
        if userns is not None and setns_net(userns, CLONE_NEWUSER) != 0:
            os._exit(125)
        if netns is not None and setns_net(netns, CLONE_NEWNET) != 0:
            os._exit(125)
        for fd in cgroup_fds:
            os.write(fd, b"0")
        for which, value in limits:
            resource.setrlimit(which, (value, value))
        for fd in used:
            os.close(fd)  # used: the jail must not inherit them (host cgroup paths, the namespace)
        jailer.enter()

    return enter
