#!/bin/bash
# Stage 2 of the VM, PID 1 of the guest (the initramfs's init hands over to
# this file as the guest sees it in the host's root): mount what a booted
# cgroup-v2 host has, put the job in the cgroup its kind of user would sit
# in, run it as that user, leave its exit status in the job folder, power off.
#
# The job folder (the host's, 9p tag "job", read-write) holds `settings`
# (KIND, SHARE, TESTER, written by run.sh) and `job.sh` (cd + the command);
# the guest writes `rc` there. The job's output goes to the second serial
# port, which run.sh prints; the first one carries the boot log.
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

JOB=/run/execbox-vm
say() { printf 'execbox-vm guest: %s\n' "$*" >/dev/ttyS0; }
power_off() {
    sync
    echo o >/proc/sysrq-trigger
    # Wait with a builtin for the power to go (the files of the host's
    # root are going away); PID 1 must not exit first: that is a panic.
    read -rt 10 _ <>/dev/ttyS0
}
fail() { say "$*"; power_off; exit 1; }

mount -t proc -o nosuid,nodev,noexec proc /proc
mount -t sysfs -o nosuid,nodev,noexec sysfs /sys
mkdir -p /dev/pts /dev/shm /dev/mqueue
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts /dev/pts
mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs /dev/shm
mount -t mqueue mqueue /dev/mqueue 2>/dev/null
# /tmp stays the host's (read-only below, the overlay's tmpfs above): a checkout or a venv under
# the host's /tmp (a CI clone) must be seen in the guest
mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs /run
# As systemd mounts it on a current host.
mount -t cgroup2 -o nosuid,nodev,noexec,nsdelegate,memory_recursiveprot cgroup2 /sys/fs/cgroup \
    || fail "cannot mount cgroup2 at /sys/fs/cgroup"
ip link set lo up 2>/dev/null || say "loopback not brought up (no ip command)"

mkdir -p "$JOB"
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 job "$JOB" || fail "cannot mount the job folder (9p tag 'job')"
# shellcheck source=/dev/null
. "$JOB/settings" || fail "no settings in the job folder"
if [ -n "$SHARE" ]; then
    # Cached as the root is (a copy of the checkout read from here imported
    # 3 s faster); the guest's writes still reach the host at once.
    mkdir -p "$SHARE"
    # The folders above it may be closed to the test user on the host
    # (pytest's /tmp/pytest-of-root is 0700): searchable in the guest's
    # overlay only, as they were when the guest's /tmp was a tmpfs.
    dir=$SHARE
    while [ "$dir" != / ]; do
        dir=$(dirname "$dir")
        chmod a+x "$dir" || fail "cannot make $dir searchable in the guest's overlay"
    done
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000,cache=loose share "$SHARE" \
        || fail "cannot mount the shared folder at $SHARE (9p tag 'share')"
fi

# Controllers for every group below the root, as systemd enables them.
echo "+memory +pids +cpu" >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable memory, pids, cpu"
user_env=()
case "$KIND" in
    root)
        # Root's shell in a root-owned group of its own (a session scope).
        group=/sys/fs/cgroup/root-session
        user_env=(HOME=/root USER=root LOGNAME=root) ;;
    user|delegated)
        if ! uid=$(id -u "$TESTER") || ! gid=$(id -g "$TESTER"); then
            fail "no user $TESTER in the guest (./dev.sh test creates it)"
        fi
        home=$(getent passwd "$TESTER" | cut -d: -f6)
        user_env=(HOME="$home" USER="$TESTER" LOGNAME="$TESTER")
        if [ "$KIND" = user ]; then
            group=/sys/fs/cgroup/user-session   # root's: no delegation
        else
            # What systemd's Delegate=yes hands a user: the group and the
            # files that let it make and fill groups below.
            group=/sys/fs/cgroup/user-delegated
        fi ;;
    *) fail "unknown kind of user: $KIND" ;;
esac
mkdir "$group" || fail "cannot create $group"
if [ "$KIND" = delegated ]; then
    chown "$uid:$gid" "$group" "$group/cgroup.procs" "$group/cgroup.subtree_control" "$group/cgroup.threads" \
        || fail "cannot delegate $group to $TESTER"
fi
say "cgroup $(stat -fc %T /sys/fs/cgroup), job as $KIND in ${group#/sys/fs/cgroup}"

stty -F /dev/ttyS1 raw -echo 2>/dev/null
(
    echo "$BASHPID" >"$group/cgroup.procs" || exit 125
    base_env=(PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 TERM=dumb "${user_env[@]}")
    if [ "$KIND" = root ]; then
        exec env -i "${base_env[@]}" /bin/bash "$JOB/job.sh"
    fi
    exec setpriv --reuid="$uid" --regid="$gid" --init-groups -- env -i "${base_env[@]}" /bin/bash "$JOB/job.sh"
) </dev/null >/dev/ttyS1 2>&1
rc=$?
echo "$rc" >"$JOB/rc"
say "job exited with $rc"
power_off
