"""Removes the SysV IPC objects the block user may remove (IPC_RMID; what
another user made stays), in a container before a block runs.

Run inside the container by ``python3 -I -S -c <this file's text>`` from
``_wrapper.sh`` (the container does not see execbox's files), only when
some are left. Standard library only; no arguments.

Linux lists them in /proc/sysvipc. gVisor has no such files, and its
SHM_INFO and MSG_INFO give no highest index (so ``ipcrm --all`` misses them
there): it numbers objects up from the last one made, so a new private one
tells where to look, and ids below it are tried (IPC_STAT: its IPC_RMID of a
missing id succeeds) until as many are found as SHM_INFO, MSG_INFO and
SEM_INFO count, or a bound is reached.
"""

import ctypes
import sys

IPC_PRIVATE, IPC_RMID, IPC_STAT, SHM_INFO, MSG_INFO, SEM_INFO = 0, 0, 2, 14, 12, 19


def main():
    libc = ctypes.CDLL(None)
    buf = ctypes.create_string_buffer(512)
    # kind: (make one, control one, its INFO command, where the count in use lies in what it fills)
    kinds = {
        "shm": (
            lambda: libc.shmget(IPC_PRIVATE, 1, 0o600),
            lambda i, cmd: libc.shmctl(i, cmd, buf),
            SHM_INFO,
            0,
        ),
        "msg": (
            lambda: libc.msgget(IPC_PRIVATE, 0o600),
            lambda i, cmd: libc.msgctl(i, cmd, buf),
            MSG_INFO,
            0,
        ),
        "sem": (
            lambda: libc.semget(IPC_PRIVATE, 1, 0o600),
            lambda i, cmd: libc.semctl(i, 0, cmd, buf),
            SEM_INFO,
            28,
        ),
    }
    for kind, (make, control, info, at) in kinds.items():
        try:
            with open("/proc/sysvipc/" + kind) as f:
                listed = f.read().splitlines()[1:]
        except OSError:
            left = int.from_bytes(buf.raw[at : at + 4], sys.byteorder) if control(0, info) >= 0 else 0
            if left <= 0:
                continue
            top = make()
            if top >= 0:
                control(top, IPC_RMID)
            else:
                top = 1 << 14
            for i in range(top - 1, max(top - (1 << 14), 0) - 1, -1):
                if control(i, IPC_STAT) == 0:
                    control(i, IPC_RMID)
                    left -= 1
                    if left <= 0:
                        break
            continue
        for line in listed:
            control(int(line.split()[1]), IPC_RMID)


if __name__ == "__main__":
    main()
