"""Kernel surface: privileges, namespaces, mounts, devices and dangerous
syscalls. Each attack is asserted by its effect on the host where it has one."""

from __future__ import annotations

import ctypes
import os
import secrets
import socket

import pytest

from tests.security.conftest import DOCKER_MODES, not_for, run_then_healthy

LIBC = "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"


def _try(label: str, call: str) -> str:
    """Code printing 'OK <label>' if ``call`` returns 0 (or more), else 'failed <label> errno'."""
    return f"r = {call}\nprint(('OK' if r >= 0 else 'failed'), {label!r}, ctypes.get_errno())\n"


def test_capabilities_are_all_dropped(mode, hostile):
    code = (
        "for line in open('/proc/self/status'):\n    if line.startswith(('Cap', 'NoNewPrivs')):\n"
        "        print(line.split(':')[0], line.split()[1])\n"
        # the same asked of the kernel: PR_GET_NO_NEW_PRIVS, PR_CAP_AMBIENT_IS_SET for each capability
        + LIBC
        + "print('prctl-nnp', libc.prctl(39, 0, 0, 0, 0))\n"
        "print('prctl-ambient', sum(libc.prctl(47, 1, c, 0, 0) == 1 for c in range(64)))\n"
    )
    result = run_then_healthy(hostile, "python", code)
    fields = dict(line.split() for line in result.output.splitlines())
    expected = {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs"}
    if mode == "docker-gvisor":  # gVisor's /proc/self/status has no such lines: the prctl answers count
        expected -= {"CapAmb", "NoNewPrivs"}
    assert set(fields) >= expected, result.output
    assert {k: v for k, v in fields.items() if k.startswith("Cap") and int(v, 16)} == {}
    assert fields.get("NoNewPrivs", "1") == "1"
    assert fields["prctl-nnp"] == "1" and fields["prctl-ambient"] == "0", result.output


def test_namespaces_are_not_the_hosts(mode, hostile):
    not_for(
        mode,
        "landlock",
        "this tier has no namespaces by design: it runs where they cannot be made "
        "(Landlock, seccomp and rlimits confine the block instead)",
    )
    kinds = ["mnt", "pid", "net", "user", "uts", "ipc", "cgroup"]
    code = (
        f"import os\nfor k in {kinds!r}:\n    try:\n        print(k, os.readlink(f'/proc/self/ns/{{k}}'))\n"
        "    except FileNotFoundError:\n        print(k, 'absent')\nprint('uid', os.getuid())\n"
    )
    result = run_then_healthy(hostile, "python", code)
    inside = dict(line.split() for line in result.output.splitlines())
    for kind in kinds:
        host = os.readlink(f"/proc/self/ns/{kind}")
        if mode == "docker-gvisor" and inside[kind] == "absent":
            continue  # gVisor's own kernel does not show every kind; none of them is the host's
        assert inside[kind] != "absent", result.output
        if kind == "user" and mode in DOCKER_MODES and inside[kind] == host:
            # Docker keeps the host's user namespace unless the engine remaps uids
            # (userns-remap, rootless), which a container cannot ask for: the
            # block's uid is a host uid then, so it must not be root (its
            # capabilities are checked by test_capabilities_are_all_dropped)
            assert inside["uid"] != "0", "the block runs as the host's root"
            continue
        assert inside[kind] != host, f"the jail shares the host's {kind} namespace"


@pytest.mark.parametrize(
    "call",
    [
        "os.setuid(0)",
        "os.setgid(0)",
        "os.setresuid(0, 0, 0)",
        "os.setgroups([0])",
        "os.seteuid(0)",
    ],
)
def test_becoming_root_fails(hostile, call):
    result = run_then_healthy(
        hostile, "python", f"import os\n{call}\nprint('BECAME', os.getuid(), os.geteuid())"
    )
    assert "BECAME" not in result.stdout
    assert result.error is not None and result.error.name in ("PermissionError", "OSError"), result.output


SYSCALLS = {
    # name: (code, expected errnos are any; only success is an escape)
    "mount-tmpfs": _try("mount", "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)"),
    "mount-proc": _try("mount", "libc.mount(b'proc', b'/tmp', b'proc', 0, None)"),
    "remount-root-rw": _try(
        "remount", "libc.mount(None, b'/', None, 0x20 | 0x1000, None)"
    ),  # MS_REMOUNT|MS_BIND
    "umount-usr": _try("umount", "libc.umount2(b'/usr', 2)"),  # MNT_DETACH
    "chroot": _try("chroot", "libc.chroot(b'/tmp')"),
    "pivot-root": _try("pivot_root", "libc.syscall(155, b'/tmp', b'/tmp')"),
    "mknod-mem": _try("mknod", "libc.mknod(b'mem', 0o20600, os.makedev(1, 1))"),
    "init-module": _try("init_module", "libc.syscall(175, b'\\0' * 64, 64, b'')"),
    "finit-module": _try("finit_module", "libc.syscall(313, os.open('/usr/bin/env', os.O_RDONLY), b'', 0)"),
    "bpf-map-create": (
        "attr = (ctypes.c_uint32 * 5)(1, 4, 4, 1, 0)\n"  # BPF_MAP_TYPE_HASH
        + _try("bpf", "libc.syscall(321, 0, ctypes.byref(attr), 20)")
    ),
    "bpf-prog-load": (
        "insns = (ctypes.c_uint64 * 2)(0xb7, 0x95)\nlic = ctypes.c_char_p(b'GPL')\n"
        "attr = (ctypes.c_uint64 * 16)()\nattr[0] = 1 | (2 << 32)\n"  # SOCKET_FILTER, 2 insns
        "attr[1] = ctypes.addressof(insns)\nattr[2] = ctypes.cast(lic, ctypes.c_void_p).value\n"
        + _try("bpf", "libc.syscall(321, 5, ctypes.byref(attr), 128)")
    ),
    # system-wide CPU clock on cpu 0, kernel included: observing the host
    "perf-event-open": (
        "attr = (ctypes.c_uint32 * 32)()\nattr[0] = 1\nattr[1] = 128\n"  # SOFTWARE, size
        + _try("perf", "libc.syscall(298, ctypes.byref(attr), -1, 0, -1, 0)")
    ),
    "reboot": _try("reboot", "libc.syscall(169, 0xfee1dead, 672274793, 0, None)"),  # CMD_CAD_OFF: harmless
    "setns-proc-1": (
        "r = -1\nfor k in ('mnt', 'user', 'pid', 'net', 'uts', 'ipc'):\n"
        "    try:\n        fd = os.open(f'/proc/1/ns/{k}', os.O_RDONLY)\n"
        "    except OSError:\n        continue  # not even opened (the pool's init is not dumpable)\n"
        "    r = max(r, libc.setns(fd, 0))\n"
        "print(('OK' if r >= 0 else 'failed'), 'setns', ctypes.get_errno())\n"
    ),
    "sethostname": _try("sethostname", "libc.sethostname(b'pwned', 5)"),
    "swapoff": _try("swapoff", "libc.swapoff(b'/dev/vda')"),
    "settimeofday": (
        "tv = (ctypes.c_long * 2)(0, 0)\n" + _try("settimeofday", "libc.settimeofday(ctypes.byref(tv), None)")
    ),
}


@pytest.mark.parametrize("code", list(SYSCALLS.values()), ids=list(SYSCALLS))
def test_privileged_syscall_fails(hostile, code):
    hostname = socket.gethostname()
    result = run_then_healthy(hostile, "python", LIBC + code)
    assert result.exit_code == 0, result.output
    assert "failed" in result.output and "OK" not in result.output
    assert socket.gethostname() == hostname
    assert not (hostile.workspace.path / "mem").exists()


NESTED = (
    LIBC
    + r"""
CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWUTS = 0x10000000, 0x00020000, 0x04000000
r = libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWUTS)
print("unshare", r, ctypes.get_errno())
if r == 0:
    libc.sethostname(b"pwned", 5)
    # with every capability of the new namespace: try to get at the host
    for target in (b"/usr", b"/"):
        print("remount", target, libc.mount(None, target, None, 0x20 | 0x1000, None))   # rw again?
    print("umount", libc.umount2(WORKSPACE.encode(), 2))
    print("mount-disk", libc.mount(b"/dev/vda", b"/tmp", b"ext4", 0, None))
    os.makedirs("/tmp/jail/a", exist_ok=True)
    print("chroot", libc.chroot(b"/tmp/jail"))
    for _ in range(30):
        os.chdir("..")
    print("chroot-escape", libc.chroot(b"."))
for path in (SECRET, "/proc/1/root" + SECRET):
    try:
        print("READ", open(path).read())
    except OSError as exc:
        print("failed read", exc.errno)
for path in ("/usr/execbox-pwned", "/execbox-pwned", "/etc/execbox-pwned", "/proc/1/root/usr/execbox-pwned"):
    try:
        open(path, "w").write("pwned")
        print("WROTE", path)
    except OSError as exc:
        print("failed write", exc.errno)
"""
)


def test_nested_user_namespace_reaches_nothing(hostile, secret):
    secret_path, token = secret
    hostname = socket.gethostname()
    code = f"SECRET = {str(secret_path)!r}\nWORKSPACE = {str(hostile.workspace.path)!r}\n" + NESTED
    try:
        result = run_then_healthy(hostile, "python", code)
        assert token not in result.output
        assert "READ" not in result.output
        for path in ("/usr/execbox-pwned", "/execbox-pwned", "/etc/execbox-pwned"):
            assert not os.path.exists(path)
        assert socket.gethostname() == hostname
    finally:
        for path in ("/usr/execbox-pwned", "/execbox-pwned", "/etc/execbox-pwned"):
            if os.path.exists(path):
                os.unlink(path)


def test_setuid_binaries_give_no_root(mode, hostile):
    code = r"""
found=$(find / -xdev -perm -4000 -type f 2>/dev/null | head -20)
echo "setuid: $found"
for cmd in "su -c 'id -u' root" "sudo -n id -u" "mount -t tmpfs none /tmp" "newgrp root"; do
  bin=${cmd%% *}
  if command -v "$bin" >/dev/null; then
    out=$(eval "$cmd" </dev/null 2>&1); echo "$bin rc=$? out=$out"
  fi
done
echo "uid=$(id -ru) euid=$(id -u)"
"""
    result = run_then_healthy(hostile, "sh", code)
    # a container's blocks run as the host user (nobody when that is root);
    # the Landlock tier's, as the executor's jail id (root) or the user itself
    uid = hostile.user.split(":")[0] if mode in DOCKER_MODES else "65534"
    if mode == "landlock":
        uid = result.output.split("uid=")[-1].split()[0]
    assert f"uid={uid} euid={uid}" in result.output
    assert uid != "0"
    for line in result.output.splitlines():
        assert not line.endswith("rc=0 out=0"), line
        assert not line.startswith("mount rc=0"), line


@pytest.mark.parametrize(
    "path", ["/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg"]
)
def test_host_devices_are_absent(mode, hostile, path):
    code = f"import os\nprint('exists', os.path.exists({path!r}))\ntry:\n    open({path!r}, 'rb').read(16)\n    print('READ')\nexcept OSError as exc:\n    print('failed', exc.errno)\n"
    result = run_then_healthy(hostile, "python", code)
    if mode != "landlock" or not os.path.exists(path):  # that tier sees the host's /dev, and cannot open it
        assert "exists False" in result.output
    assert "READ" not in result.output


# Global knobs are written with the value they already hold: a successful
# write proves the hole without changing the host (core_pattern is the classic
# escape: a pipe there runs as root on the host at the next crash).
GLOBAL_SYSCTLS = ["/proc/sys/kernel/core_pattern", "/proc/sys/kernel/panic", "/proc/sys/vm/swappiness"]
KNOBS = [
    ("kmsg", "/dev/kmsg", "<7>execbox security test"),
    ("sysrq", "/proc/sysrq-trigger", "h"),  # h: print help, harmless
    *[(p.rsplit("/", 1)[1].replace("_", "-"), p, None) for p in GLOBAL_SYSCTLS],
    ("uevent-helper", "/sys/kernel/uevent_helper", ""),
    ("cgroup-procs", "/sys/fs/cgroup/cgroup.procs", "1"),
    ("oom-adj", "/proc/self/oom_score_adj", "-1000"),
]


def _read(path: str) -> str | None:
    try:
        return open(path).read()
    except OSError:
        return None


@pytest.mark.parametrize("path, data", [k[1:] for k in KNOBS], ids=[k[0] for k in KNOBS])
def test_kernel_knobs_are_not_writable(mode, make_hostile, path, data):
    if path == "/proc/self/oom_score_adj":
        not_for(
            mode,
            "docker-gvisor",
            "the block's oom_score_adj is a value in gVisor's own kernel; "
            "the host's OOM killer sees the sandbox as a whole, never the block",
        )
    hostile = make_hostile()
    before = {p: _read(p) for p in GLOBAL_SYSCTLS}
    value = f"open({path!r}, 'rb').read()" if data is None else repr(data.encode())
    # unbuffered, no O_CREAT: a knob is written or refused, never created as a plain file
    code = (
        f"import os\ntry:\n    data = {value}\n    fd = os.open({path!r}, os.O_WRONLY)\n"
        f"    os.write(fd, data)\n    os.close(fd)\n    print('WROTE')\n"
        f"except OSError as exc:\n    print('failed', exc.errno)\n"
    )
    try:
        result = run_then_healthy(hostile, "python", code)
        after = {p: _read(p) for p in GLOBAL_SYSCTLS}
    finally:  # should the jail have changed the host, put it back
        for p, old in before.items():
            if old is not None and _read(p) != old:
                open(p, "w").write(old)
    assert after == before
    assert "failed" in result.output and "WROTE" not in result.output, f"{path} is writable from the jail"


def test_hostname_of_the_host_is_unchanged(hostile):
    hostname = socket.gethostname()
    code = (
        LIBC + "libc.sethostname(b'pwned', 5)\ntry:\n"
        "    fd = os.open('/proc/sys/kernel/hostname', os.O_WRONLY)\n    os.write(fd, b'pwned')\n"
        "except OSError as exc:\n    print('failed', exc.errno)\nimport socket\nprint('inside', socket.gethostname())\n"
    )
    result = run_then_healthy(hostile, "python", code)
    assert "inside" in result.output
    assert socket.gethostname() == hostname
    assert open("/proc/sys/kernel/hostname").read().strip() == hostname


def test_host_keyring_is_not_readable(hostile):
    """Kernel keys are owned by kernel uids: the jail's uid maps to the host's."""
    libc = ctypes.CDLL(None, use_errno=True)
    description, payload = f"execbox-test-{secrets.token_hex(8)}", secrets.token_hex(16)
    serial = libc.syscall(
        248, b"user", description.encode(), payload.encode(), len(payload), -4
    )  # add_key @u
    if serial < 0:
        pytest.skip(f"cannot add a key to the host's user keyring (errno {ctypes.get_errno()})")
    code = LIBC + (
        f"buf = ctypes.create_string_buffer(256)\n"
        f"for op, args in ((11, ({serial}, buf, 256)), (6, ({serial}, buf, 256)),\n"
        f"                 (10, (-4, b'user', {description.encode()!r}, 0))):\n"
        f"    print('keyctl', op, libc.syscall(250, op, *args), ctypes.get_errno(), buf.value)\n"
        f"try:\n    print(open('/proc/keys').read())\nexcept OSError as exc:\n    print('failed', exc.errno)\n"
    )
    try:
        result = run_then_healthy(hostile, "python", code)
    finally:
        libc.syscall(250, 21, serial)  # KEYCTL_INVALIDATE
    assert payload not in result.output
    assert description not in result.output, "the jail sees the host user's kernel keys (/proc/keys)"
