"""Golden tests of the jail policy: the exact bwrap options each jail of
execbox gets, and the seccomp program of each profile, read back as rules.

A change to what a jail sees shows here as a diff of a file in
tests/fixtures/jail/ (one bwrap argument a line; one BPF instruction a line,
system calls by name). After a change made on purpose, rewrite them with
``EXECBOX_UPDATE_GOLDEN=1 pytest tests/backends/test_jail_policy.py`` and
read the diff in review. The host's layout is a fixed one (a merged /usr,
no /lib32), so the files are the same on every machine.
"""

from __future__ import annotations

import errno
import itertools
import os
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from execbox import CodeBlock, Limits, SandboxExecutor, Workspace
from execbox._gpus import GpuGrant
from execbox.backends.sandbox import find_bwrap
from execbox.jail import _seccomp, policy_for
from execbox.jail._launcher import prepare
from execbox.jail._policy import Host, JailPolicy
from tests.conftest import require

GOLDEN = Path(__file__).resolve().parent.parent / "fixtures" / "jail"
UPDATE = os.environ.get("EXECBOX_UPDATE_GOLDEN") == "1"

# a merged-/usr Debian: /bin, /sbin, /lib and /lib64 are links into /usr; no /lib32 or /libx32
LINKS = {"/bin": "usr/bin", "/sbin": "usr/sbin", "/lib": "usr/lib", "/lib64": "usr/lib64"}
HOST = Host(
    is_link=lambda path: path in LINKS,
    read_link=LINKS.__getitem__,
    is_dir=lambda path: path == "/usr",
    exists=lambda path: path != "/proc/sched_debug",  # a kernel without it: not bound
)

WORKSPACE = "/home/user/project"
VENV = ("/home/user/.venv", "/opt/python3.11")
BLOCK = JailPolicy(
    workspace=WORKSPACE,
    readonly=VENV,
    sealed=(".execbox",),
    tmp_bytes=256 << 20,
    rlimits=(("NOFILE", 1024), ("FSIZE", 1 << 30), ("CORE", 0)),
    memory_mb=2048,
    max_processes=512,
    env=(("HOME", "/tmp"), ("TMPDIR", "/tmp"), ("PATH", "/home/user/.venv/bin:/usr/local/bin:/usr/bin:/bin")),
)

# name -> the policy of one jail execbox makes (as SandboxExecutor._jail_policy, _make_pool and
# JupyterExecutor._new_kernel build them)
POLICIES = {
    "oneshot": BLOCK,
    "oneshot-joined-netns": replace(BLOCK, joined_netns=True),
    # network on: the executor's egress namespace, joined (never the host's), its resolver file bound
    "network": replace(
        BLOCK,
        network=True,
        joined_netns=True,
        resolv_conf="/tmp/execbox-egress-x1/resolv.conf",
        hostname="box-7",
        tmp_bytes=64 << 20,
    ),
    "pool-zygote": replace(
        BLOCK,
        extra_readonly=(("/opt/execbox/_zygote", "/run/execbox-zygote"),),
        seccomp="zygote",
        env=(("PATH", "/home/user/.venv/bin:/usr/local/bin:/usr/bin:/bin"), ("HOME", "/tmp")),
    ),
    "jupyter-kernel": replace(BLOCK, writable=(("/tmp/execbox-kernel-x1", "/run/execbox"),)),
    # a GPU's: device nodes bound as they are
    "devices": replace(
        BLOCK, devices=(("/dev/nvidia0", "/dev/nvidia0"), ("/dev/nvidiactl", "/dev/nvidiactl"))
    ),
    "no-seccomp": replace(BLOCK, seccomp=None),
}


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run with EXECBOX_UPDATE_GOLDEN=1 and review it"
    assert text == path.read_text(), (
        f"{name} differs from {path}; if the change is meant, rewrite it with EXECBOX_UPDATE_GOLDEN=1"
    )


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_bwrap_options_are_pinned(name):
    options = POLICIES[name].bwrap_options(host=HOST)
    check_golden(f"{name}.argv", "\n".join(options) + "\n")


def test_every_policy_keeps_the_fixed_walls():
    """What no policy may lose, whatever the golden files say."""
    for name, policy in POLICIES.items():
        options = policy.bwrap_options(host=HOST)
        pairs = list(itertools.pairwise(options))
        for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--clearenv"):
            assert flag in options, (name, flag)
        assert ("--cap-drop", "ALL") in pairs and ("--uid", "65534") in pairs, name
        end = len(options) - 3 * len(policy.env)  # then only the environment's --setenv triples
        assert options[end - 4 : end] == ["--chdir", WORKSPACE, "--remount-ro", "/"], name
        assert ("--share-net" in options) == policy.joined_netns, name  # never the host's network
        assert ("--ro-bind-try", "/etc/resolv.conf") not in pairs, name  # the host's resolver never
        if policy.network:
            assert ("--ro-bind", policy.resolv_conf) in pairs and "/etc/resolv.conf" in options, name
        # the workspace is the only host path bound writable, besides the writable pairs asked for
        writable = [b for a, b in pairs if a == "--bind"]
        assert writable == [h for h, _ in policy.writable] + [WORKSPACE], name


def test_source_maps_every_host_path_bound():
    """A jail run as a leased id binds staged copies: every host path goes
    through ``source``, none of the system's."""
    policy = POLICIES["jupyter-kernel"]
    options = policy.bwrap_options(source=lambda path: "/staged" + path, host=HOST)
    bound = [options[i + 1] for i, arg in enumerate(options) if arg in ("--ro-bind", "--bind")]
    staged = {p for p in bound if p.startswith("/staged/")}
    assert staged == {
        "/staged/home/user/.venv",
        "/staged/opt/python3.11",
        "/staged/tmp/execbox-kernel-x1",
        f"/staged{WORKSPACE}",
        f"/staged{WORKSPACE}/.execbox",
    }
    assert set(bound) - staged <= {"/usr", "/proc/sys", "/dev/null"}


def test_bad_policies_are_refused_with_what_to_change():
    with pytest.raises(ValueError, match="seccomp"):
        JailPolicy(workspace=WORKSPACE, seccomp="strict")
    with pytest.raises(ValueError, match="without RLIMIT_"):
        JailPolicy(workspace=WORKSPACE, rlimits=(("RLIMIT_NOFILE", 8),))


def test_the_environment_is_left_out_of_repr():
    policy = replace(BLOCK, env=(("API_KEY", "sk-secret-1"),))
    assert "sk-secret-1" not in repr(policy)


# ---- seccomp: the program of each profile, read back instruction by instruction

_NAMES = {
    "x86_64": {n: name for name, n in _seccomp._X86_64.items()},
    "aarch64": {n: name for name, n in _seccomp._AARCH64.items()},
}
_FIELDS = {0: "nr", 4: "arch", 16: "args[0]", 24: "args[1]", 32: "args[2]", 40: "args[3]"}


def _ret(k: int) -> str:
    if k == 0x7FFF0000:
        return "ret ALLOW"
    if k == 0x80000000:
        return "ret KILL_PROCESS"
    if k & 0xFFFF0000 == 0x00050000:
        return f"ret ERRNO({errno.errorcode.get(k & 0xFFFF, k & 0xFFFF)})"
    return f"ret {k:#x}"


def disassemble(program: bytes, machine: str) -> list[str]:
    """One line an instruction: what is loaded, compared (a system call by
    name when the number was loaded) and returned."""
    lines, loaded = [], ""
    for index in range(0, len(program), 8):
        code, jt, jf, k = struct.unpack("=HBBI", program[index : index + 8])
        at = f"{index // 8:3d}: "
        if code == 0x20:
            loaded = _FIELDS.get(k, f"data[{k}]")
            lines.append(f"{at}ld {loaded}")
        elif code in (0x15, 0x35, 0x45):
            op = {0x15: "jeq", 0x35: "jge", 0x45: "jset"}[code]
            value = _NAMES[machine].get(k, f"{k:#x}") if loaded == "nr" and code == 0x15 else f"{k:#x}"
            lines.append(f"{at}{op} {value} true+{jt} false+{jf}")
        elif code == 0x54:
            lines.append(f"{at}and {k:#x}")
        elif code == 0x06:
            lines.append(f"{at}{_ret(k)}")
        else:
            lines.append(f"{at}code {code:#x} {jt} {jf} {k:#x}")
    return lines


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
@pytest.mark.parametrize("profile", ["block", "zygote"])
def test_seccomp_rules_are_pinned(profile, machine):
    program = replace(BLOCK, seccomp=profile).seccomp_program(machine)
    assert program is not None and len(program) % 8 == 0
    check_golden(f"seccomp-{profile}-{machine}.txt", "\n".join(disassemble(program, machine)) + "\n")


def test_profiles_differ_by_the_zygotes_calls_only():
    for machine in ("x86_64", "aarch64"):
        block = set(disassemble(replace(BLOCK, seccomp="block").seccomp_program(machine) or b"", machine))
        names = {line.split()[2] for line in block if " jeq " in line}
        zygote_lines = disassemble(replace(BLOCK, seccomp="zygote").seccomp_program(machine) or b"", machine)
        zygote_names = {line.split()[2] for line in zygote_lines if " jeq " in line}
        assert names - zygote_names == set(_seccomp.ZYGOTE_ALLOWED)
        assert zygote_names <= names
    assert replace(BLOCK, seccomp=None).seccomp_program() is None


# ---- the launcher: what it hands the child


class _Jailer:
    """Jailer's interface for a host that needs no leased id."""

    @staticmethod
    def source(path: str) -> str:
        return path

    @staticmethod
    def enter() -> None:
        return None


def _options_in(launch) -> list[str]:
    fd = int(launch.argv[launch.argv.index("--args") + 1])
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 1 << 16):
        data += chunk
    return data.decode().split("\0")[:-1]


def test_launch_hides_the_options_and_adds_this_launchs_variables():
    launch = prepare(
        "/usr/bin/bwrap", BLOCK, ["python3", "-c", "pass"], jailer=_Jailer(), env={"TOKEN": "t1"}
    )
    try:
        assert launch.argv[0] == "/usr/bin/bwrap" and launch.argv[1] == "--args"
        assert launch.argv[3:] == ["--", "python3", "-c", "pass"]  # nothing of the host's layout
        options = _options_in(launch)
        seccomp_fd = options[options.index("--seccomp") + 1]
        assert options[: options.index("--seccomp")] == [*BLOCK.bwrap_options(), "--setenv", "TOKEN", "t1"]
        assert sorted(launch.pass_fds) == sorted([int(launch.argv[2]), int(seccomp_fd)])
        with os.fdopen(os.dup(int(seccomp_fd)), "rb") as pipe:
            assert pipe.read() == BLOCK.seccomp_program()
    finally:
        launch.close()
    for fd in launch.pass_fds:  # closed by close()
        with pytest.raises(OSError):
            os.fstat(fd)


def test_launch_without_seccomp_or_with_a_mismatched_netns():
    launch = prepare("/usr/bin/bwrap", BLOCK, ["true"], jailer=_Jailer(), seccomp=False)
    try:
        assert "--seccomp" not in _options_in(launch)
        assert len(launch.pass_fds) == 1
    finally:
        launch.close()
    with pytest.raises(ValueError, match="joined_netns"):
        prepare("/usr/bin/bwrap", POLICIES["oneshot-joined-netns"], ["true"], jailer=_Jailer())


def test_a_jail_with_the_network_on_starts_only_in_a_namespace_given():
    """Network on is the executor's egress namespace (_egress), never the
    host's: without one the launcher refuses, and the options of such a
    policy share no namespace."""
    alone = replace(BLOCK, network=True)
    assert "--share-net" not in alone.bwrap_options(host=HOST)
    with pytest.raises(ValueError, match="egress namespace"):
        prepare("/usr/bin/bwrap", alone, ["true"], jailer=_Jailer())


def test_the_executor_builds_its_policy_from_the_limits_and_options(tmp_path):
    """The values above are the shape the executor makes: its policy says
    what its limits and options say."""
    require("bubblewrap", find_bwrap() is not None, "apt-get install bubblewrap (./dev.sh does)")
    limits = Limits(timeout_s=5, memory_mb=300, max_processes=40, network=False, cpus=1.0)
    with SandboxExecutor(
        workspace=Workspace(tmp_path), limits=limits, pool=False, tmp_size_mb=32, hostname="box-1"
    ) as executor:
        assert executor.isolation_in_use == "namespaces"
        policy = executor._policy
        assert (
            executor.run(CodeBlock("python", "import socket; print(socket.gethostname())")).output
            == "box-1\n"
        )
    assert policy.workspace == str(tmp_path)
    assert (policy.memory_mb, policy.max_processes, policy.cpus) == (300, 40, 1.0)
    assert (policy.tmp_bytes, policy.hostname, policy.network) == (32 << 20, "box-1", False)
    assert policy.sealed == (".execbox",) and policy.seccomp == "block"
    assert dict(policy.rlimits)["NOFILE"] == 1024 and "NPROC" not in dict(policy.rlimits)
    assert dict(policy.env)["HOME"] == "/tmp"
    assert policy.joined_netns == (os.geteuid() == 0)  # one empty namespace per executor, as root


def test_one_function_builds_both_backends_policies_from_the_limits():
    """``jail.policy_for`` is the one place Limits become a jail's policy:
    the sandbox's blocks (its options as parameters) and the jailed Jupyter
    kernel (the defaults) get the policies pinned above."""
    limits = Limits(memory_mb=2048, max_processes=512)
    common = {"workspace": WORKSPACE, "env": dict(BLOCK.env), "rlimits": dict(BLOCK.rlimits)}
    assert policy_for(limits, readonly=VENV, **common) == BLOCK
    kernel = policy_for(limits, **common)  # the kernel's: its interpreter is staged, not bound
    assert kernel == replace(BLOCK, readonly=())
    options = policy_for(
        replace(limits, network=True, cpus=0.5),
        readonly=VENV,
        tmp_bytes=64 << 20,
        hostname="box-7",
        seccomp=False,
        **common,
    )
    assert options == replace(
        BLOCK, network=True, cpus=0.5, tmp_bytes=64 << 20, hostname="box-7", seccomp=None
    )
    assert policy_for(Limits(), **common).memory_mb == Limits().effective_memory_mb()  # the defaults
    assert policy_for(Limits(), **common).max_processes == Limits().effective_max_processes()


def test_a_gpu_grant_adds_its_nodes_folders_and_variables():
    given = GpuGrant(
        gpus=(),
        nodes=(("/dev/nvidia0", "/dev/nvidia0"),),
        readonly=("/opt/driver",),
        env=(("CUDA_VISIBLE_DEVICES", "GPU-1"),),
        bin_path=("/opt/driver/bin",),
    )
    common = {"workspace": WORKSPACE, "env": dict(BLOCK.env), "rlimits": dict(BLOCK.rlimits)}
    policy = policy_for(Limits(memory_mb=2048, max_processes=512), readonly=VENV, gpu=given, **common)
    assert policy.devices == given.nodes and policy.extra_readonly == (("/opt/driver", "/opt/driver"),)
    env = dict(policy.env)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1" and env["PATH"].endswith(":/opt/driver/bin")
    assert replace(policy, devices=(), extra_readonly=(), env=BLOCK.env) == BLOCK


def test_the_pools_box_is_pinned():
    """A pool's box (_zygote/box.py): made inside the zygote's jail
    (pool-zygote.argv), not by bwrap, so its namespaces, /tmp and /dev/shm,
    the paths kept, each block's limits and filter are pinned as lines."""
    from execbox.backends.sandbox._box_spec import box_config, box_lines

    block = replace(
        BLOCK, workspace="/tmp/execbox-ws-1/project", env=(("PATH", "/usr/bin"), ("LANG", "C.UTF-8"))
    )
    config = box_config(
        block,
        replace(block, seccomp="zygote"),
        preload=("numpy",),
        rlimits={"NOFILE": 1024, "FSIZE": 1 << 30, "CORE": 0, "NPROC": 512},
        pid_namespace=True,
    )
    check_golden("pool-box.txt", "\n".join(box_lines(config)) + "\n")
    gpu = box_lines({**config, "pid_namespace": False})
    assert gpu[0] == "box namespaces (made once, kept): mount (no pid: its init is the subreaper)", gpu
