#!/usr/bin/env bash
# Boot a cgroup-v2 kernel under qemu (TCG) on this machine's own root
# filesystem and run one command in it, as one kind of user:
#   scripts/vm/run.sh [--as root|user|delegated] [--cwd DIR] [--share DIR]
#                     [--timeout S] [--memory MB] -- command [args...]
#   --as root       root, in a root-owned group of its own (the default)
#   --as user       the non-root test user, in a root-owned group (no delegation)
#   --as delegated  that user in a group delegated to it (systemd's Delegate=yes)
#   --cwd DIR       where the command starts (default: the current folder)
#   --share DIR     a host folder the guest may write, at the same path (results;
#                   cached: what the host changes there during the run may not show)
#   --timeout S     qemu is killed after S seconds (default 900)
#   --log FILE      keep the guest's boot log (kernel and stage 2) there
# The guest sees the host's root read-only under a tmpfs overlay: it writes
# where it likes and the writes vanish. The command's output is printed as it
# comes; the exit status is the command's (124: timed out, 125: the guest did
# not run it; the boot log's tail is printed then). Root only: qemu reads
# the whole root filesystem as its owners see it. No network in the guest.
# The kernel and initramfs come from scripts/vm/build.sh (cached).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${EXECBOX_VM_CACHE:-$(cd "$HERE/../.." && pwd)/.cache/vm}
TESTER=execbox-tester

say() { printf 'vm: %s\n' "$*" >&2; }
usage() { say "usage: $0 [--as root|user|delegated] [--cwd DIR] [--share DIR] [--timeout S] [--memory MB] [--log FILE] -- command..."; exit 2; }

kind=root cwd=$PWD share="" timeout_s=900 memory_mb=3072 log=""
while [ $# -gt 0 ]; do
    case "$1" in
        --as) kind=${2:-}; shift 2 ;;
        --cwd) cwd=${2:-}; shift 2 ;;
        --share) share=${2:-}; shift 2 ;;
        --timeout) timeout_s=${2:-}; shift 2 ;;
        --memory) memory_mb=${2:-}; shift 2 ;;
        --log) log=${2:-}; shift 2 ;;
        --) shift; break ;;
        *) usage ;;
    esac
done
[ $# -gt 0 ] || usage
case "$kind" in root|user|delegated) ;; *) usage ;; esac
[ "$(id -u)" = 0 ] || { say "needs root: qemu shares the whole root filesystem with the guest as its owners see it"; exit 2; }
command -v qemu-system-x86_64 >/dev/null 2>&1 || { say "qemu-system-x86_64 is missing: apt-get install qemu-system-x86 (./dev.sh vm does)"; exit 2; }
if [ "$kind" != root ] && ! id "$TESTER" >/dev/null 2>&1; then
    say "no user $TESTER: ./dev.sh test creates it"; exit 2
fi
[ -d "$cwd" ] || { say "no folder $cwd (--cwd)"; exit 2; }
cwd=$(cd "$cwd" && pwd)
if [ -n "$share" ]; then
    [ -d "$share" ] || { say "no folder $share (--share)"; exit 2; }
    share=$(cd "$share" && pwd)
fi

"$HERE/build.sh"

job=$(mktemp -d /tmp/execbox-vm.XXXXXX)
finish() {
    [ -z "$log" ] || cp "$job/console.log" "$log"
    rm -rf "$job"
}
trap finish EXIT
chmod 0755 "$job"   # the job's user reads job.sh
printf 'KIND=%q\nSHARE=%q\nTESTER=%q\n' "$kind" "$share" "$TESTER" >"$job/settings"
{
    printf 'cd -- %q || exit 125\n' "$cwd"
    printf 'exec'
    printf ' %q' "$@"
    printf '\n'
} >"$job/job.sh"
: >"$job/console.log"

shares=(-virtfs "local,id=root,path=/,mount_tag=root,security_model=passthrough,readonly=on,multidevs=remap"
        -virtfs "local,id=job,path=$job,mount_tag=job,security_model=passthrough,multidevs=remap")
if [ -n "$share" ]; then
    shares+=(-virtfs "local,id=share,path=$share,mount_tag=share,security_model=passthrough,multidevs=remap")
fi
# TCG: a KVM guest hangs at boot on the machines this runs on. -cpu max: the
# host's Python and its wheels may use any x86-64 extension. Two serial
# ports: the boot log to a file, the job's output to our stdout.
# tsc=reliable: the guest finds TCG's TSCs unsynchronised and falls back to
# the HPET, whose every read is an emulated device access (a Python busy
# loop ran 2.4x slower); mitigations=off: nothing to protect from in here.
timeout --kill-after=10 "$timeout_s" qemu-system-x86_64 \
    -accel tcg -cpu max -smp 2 -m "$memory_mb" \
    -nodefaults -no-user-config -display none -no-reboot -nic none \
    -kernel "$CACHE/vmlinuz" -initrd "$CACHE/initramfs.cpio.gz" \
    -append "console=ttyS0 loglevel=6 printk.time=1 panic=-1 tsc=reliable mitigations=off cgroup_no_v1=all execbox.stage2=$HERE/guest.sh" \
    -chardev "file,id=boot,path=$job/console.log" -serial chardev:boot \
    -chardev stdio,id=out,signal=off -serial chardev:out \
    "${shares[@]}" </dev/null &
# timeout puts qemu in a process group of its own, out of reach of a Ctrl-C
# or a signal to this script: pass those on, and wait for qemu to be gone.
qemu=$! status=0 stopped=""
trap 'stopped=1; kill -TERM "$qemu" 2>/dev/null' INT TERM HUP
while kill -0 "$qemu" 2>/dev/null; do
    wait "$qemu" && status=0 || status=$?
done
if [ -n "$stopped" ]; then
    say "stopped: qemu killed"
    exit 130
fi

if [ -f "$job/rc" ]; then
    exit "$(cat "$job/rc")"
fi
if [ "$status" = 124 ] || [ "$status" = 137 ]; then
    say "timed out after $timeout_s s (--timeout); the boot log's last lines:"
    status=124
else
    say "the guest did not run the command (qemu exit status $status); the boot log's last lines:"
    status=125
fi
tail -n 30 "$job/console.log" >&2
exit "$status"
