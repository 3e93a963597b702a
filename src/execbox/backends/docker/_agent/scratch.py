"""What the agent (``agent.py``, beside this file) reads and clears of its
container between blocks: the processes left, the OOM kill count, and the
scratch places (/tmp, /dev/shm, /dev/mqueue, SysV IPC objects). Runs
inside the container: standard library only, Python 3.6 or later.
"""

import os
import shutil

import ipc_sweep  # beside this file

SCRATCH = ("/tmp", "/dev/shm", "/dev/mqueue")


def oom_kills():
    """The container's OOM kill count (cgroup v1 or v2), or None."""
    for path in ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events"):
        try:
            with open(path) as handle:
                text = handle.read()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def processes():
    """How many processes the container has (zombies not counted)."""
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/" + name + "/stat", "rb") as handle:
                state = handle.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if state not in (b"Z", b"X"):
            count += 1
    return count


def empty_scratch():
    """/tmp, /dev/shm, /dev/mqueue and the SysV IPC objects, emptied."""
    for folder in SCRATCH:
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for name in entries:
            path = os.path.join(folder, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
            except OSError:
                pass
    listed = False
    for kind in ("shm", "msg", "sem"):
        try:
            with open("/proc/sysvipc/" + kind) as handle:
                if len(handle.read().splitlines()) > 1:
                    listed = True
        except OSError:
            listed = True  # gVisor: no such files; the sweep counts them itself
            break
    if listed:
        try:
            ipc_sweep.main()
        except Exception:
            pass
