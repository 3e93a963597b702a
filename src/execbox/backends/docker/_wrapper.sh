# shellcheck shell=sh
# The wrapper of every block run by docker exec (see _exec.py), as
# `/bin/sh -c "<this file>" execbox ARGV...`: "$@" is the block's command.
# Its environment: EXECBOX_RUN_TOKEN (the block's), EXECBOX_LIVE_TOKENS (the
# executor's other running blocks, space-separated), EXECBOX_KILLER and
# EXECBOX_IPC_SWEEP (the texts of _killer.py and _ipc_sweep.py: the
# container does not see execbox's files).
#
# Before the block, when no other block runs (only init, the keep-alive and
# the wrapper are there; a killed process not yet reaped does not count), it
# empties what a block could leave outside the workspace: /tmp, /dev/shm and
# /dev/mqueue (hidden names too), and SysV shared memory, message queues and
# semaphores (the IPC sweep, started only when /proc/sysvipc lists some;
# gVisor has no /proc/sysvipc: `ipcs -u` counts them). Before, not after: a
# block that timed out or was cancelled is killed with its wrapper, and the
# next one must not find its leftovers. Then it runs "$@"; then, if anything
# besides init, the keep-alive and itself is left in the container, the
# killer (which spares the wrapper, its parent, so that the block's exit
# status survives; a fork it cannot make at once, after a fork bomb, is
# tried again). Shell built-ins only, unless something is there. python3 -I:
# the helpers must not import what a block planted.
alone() {
    n=0
    for p in /proc/[0-9]*; do
        read -r stat 2>/dev/null <"$p/stat" || continue
        case ${stat##*) } in Z*|X*) ;; *) n=$((n + 1)) ;; esac
    done
    [ $n -le 3 ]
}
ipc_left() {
    if [ -r /proc/sysvipc/shm ]; then
        for f in /proc/sysvipc/shm /proc/sysvipc/msg /proc/sysvipc/sem; do
            { read -r _ && read -r _; } <"$f" 2>/dev/null && return 0
        done
        return 1
    fi
    out=$(LC_ALL=C ipcs -u 2>/dev/null)
    for zero in "allocated queues = 0" "segments allocated 0" "used arrays = 0"; do
        case $out in *"$zero"*) ;; *) return 0 ;; esac
    done
    return 1
}
if alone; then
    for d in /tmp /dev/shm /dev/mqueue; do
        for f in "$d"/* "$d"/.[!.]* "$d"/..?*; do
            if [ -e "$f" ] || [ -L "$f" ]; then
                rm -rf "${d:?}"/* "$d"/.[!.]* "$d"/..?* 2>/dev/null
                break
            fi
        done
    done
    ipc_left && python3 -I -S -c "$EXECBOX_IPC_SWEEP" 2>/dev/null
fi
"$@"
rc=$?
if ! alone; then
    for _ in 1 2 3 4 5; do
        # shellcheck disable=SC2086 # the live tokens: one argument each
        python3 -I -c "$EXECBOX_KILLER" "$EXECBOX_RUN_TOKEN" $EXECBOX_LIVE_TOKENS 2>/dev/null && break
        sleep 0.2 2>/dev/null
    done
fi
exit $rc
