"""The jail kit: what every jail of execbox is made of, whoever runs it.

The sandbox backend (its warm pool, one-shot jails, the Landlock tier), the
jailed Jupyter kernel and ``execbox doctor`` use it; it imports no backend
(``tests/test_layers.py``), and other packages import these names from
``execbox.jail``, never its private modules.

- the policy (``_policy``: ``JailPolicy``, what a jail sees and what holds
  it) and its seccomp profiles (``_seccomp``);
- the launcher (``_launcher``: a policy and a command become bubblewrap's
  argv, the pre-exec step and the descriptors) and bubblewrap's helpers
  (``_jail``: finding it, the jail's environment and rlimits, a probe);
- the jail's identity on the host (``_identity``: a leased uid when
  execbox is root, the folders shown to it, ``_acl``), the cgroups that
  hold a block (``_cgroups``), the network on (``_egress``: a namespace
  whose way out reaches the internet, not this machine), GPUs (``_gpu``,
  ``_nvml``), Landlock (``landlock``: the module, its rights and calls),
  the container the jail runs in (``_container``), every message to and
  from a jail non-blocking with a deadline (``_sockets``), and the host's
  side of a box, a jail made once and reused block after block (``_box``:
  its init's socket, its cgroup, a block's share of it).

Not public API: ``execbox`` does not export it, and its names may change.
"""

from __future__ import annotations

from . import _landlock as landlock
from ._acl import grant_search, mount_namespaces
from ._box import BlockCounts, BlockShare, Box
from ._cgroups import BlockCgroup, BlockGroup, CgroupSupport, cgroup_support
from ._container import FULL_ISOLATION, FULL_ISOLATION_OPTIONS, NETWORK_ISOLATION, container
from ._egress import Egress, open_egress
from ._gpu import (
    GPU_MEMORY_GAP,
    GpuWatcher,
    gpu_environment,
    gpu_mechanism,
    gpu_memory_watcher,
    gpu_policy,
    no_watch,
)
from ._identity import Jailer, Lease, give_pipe, is_jail_id, lease, reach_group, reachable
from ._jail import (
    INSIDE_PATH,
    INSTALL_HINT,
    by_name,
    empty_netns,
    find_bwrap,
    inside_environment,
    interpreter_dirs,
    jail_rlimits,
    probe,
    spawn_kept,
)
from ._launcher import Launch, prepare
from ._limits import cgroup_maker, policy_for
from ._policy import ETC_FILES, NETWORK_FILES, SYSTEM_DIRS, JailPolicy
from ._seccomp import HOST_IPC, NAME_WATCHES, filter_program
from ._seccomp import supported as seccomp_supported
from ._sockets import receive_within, recv_fds_now, send_fds_now, send_within

__all__ = [
    "ETC_FILES",
    "FULL_ISOLATION",
    "FULL_ISOLATION_OPTIONS",
    "GPU_MEMORY_GAP",
    "HOST_IPC",
    "INSIDE_PATH",
    "INSTALL_HINT",
    "NAME_WATCHES",
    "NETWORK_FILES",
    "NETWORK_ISOLATION",
    "SYSTEM_DIRS",
    "BlockCgroup",
    "BlockCounts",
    "BlockGroup",
    "BlockShare",
    "Box",
    "CgroupSupport",
    "Egress",
    "GpuWatcher",
    "JailPolicy",
    "Jailer",
    "Launch",
    "Lease",
    "by_name",
    "cgroup_maker",
    "cgroup_support",
    "container",
    "empty_netns",
    "filter_program",
    "find_bwrap",
    "give_pipe",
    "gpu_environment",
    "gpu_mechanism",
    "gpu_memory_watcher",
    "gpu_policy",
    "grant_search",
    "inside_environment",
    "interpreter_dirs",
    "is_jail_id",
    "jail_rlimits",
    "landlock",
    "lease",
    "mount_namespaces",
    "no_watch",
    "open_egress",
    "policy_for",
    "prepare",
    "probe",
    "reach_group",
    "reachable",
    "receive_within",
    "recv_fds_now",
    "seccomp_supported",
    "send_fds_now",
    "send_within",
    "spawn_kept",
]
