#!/usr/bin/env bash
# Make a Docker engine available for execbox's docker backend (idempotent):
#   - installs Debian's docker.io (engine), runsc (gVisor) and debootstrap
#     (the base image is built from a Debian rootfs: no registry is needed);
#   - starts dockerd when none answers, with runsc registered as a runtime
#     (`--network=none`: gVisor refuses to set up networking in the host's
#     root network namespace);
#   - waits until the engine answers.
# A daemon that already runs (systemd's, say) is used as it is; when it lacks
# the runsc runtime, this says how to add it.
set -euo pipefail

say() { printf 'docker-engine: %s\n' "$*" >&2; }

sudo=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || { say "need root (or sudo) to install and start the engine"; exit 1; }
    sudo="sudo"
fi

need=()
command -v dockerd >/dev/null 2>&1 || [ -x /usr/sbin/dockerd ] || need+=(docker.io)
command -v runsc >/dev/null 2>&1 || need+=(runsc)
command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
if [ ${#need[@]} -gt 0 ]; then
    say "installing ${need[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
fi

engine_up() { $sudo docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

CONFIG=/etc/execbox/dockerd.json
LOG=/var/log/execbox-dockerd.log
if ! engine_up; then
    $sudo mkdir -p /etc/execbox
    runsc_path=$(command -v runsc)
    $sudo tee "$CONFIG" >/dev/null <<JSON
{
  "runtimes": {"runsc": {"path": "$runsc_path", "runtimeArgs": ["--network=none"]}}
}
JSON
    say "starting dockerd (config $CONFIG, log $LOG)"
    # setsid: the engine outlives this script and the shell that ran it.
    $sudo setsid /usr/sbin/dockerd --config-file "$CONFIG" >"$LOG" 2>&1 < /dev/null &
    for _ in $(seq 1 150); do
        engine_up && break
        sleep 0.2
    done
    engine_up || { say "dockerd did not answer within 30 s; its log:"; tail -20 "$LOG" >&2; exit 1; }
fi

if ! $sudo docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    say "note: the running engine has no runsc runtime; gVisor tests need it. Add"
    say "  \"runtimes\": {\"runsc\": {\"path\": \"$(command -v runsc || echo /usr/bin/runsc)\", \"runtimeArgs\": [\"--network=none\"]}}"
    say "to /etc/docker/daemon.json and reload the daemon (systemctl reload docker)"
fi
say "engine ready: $($sudo docker version --format 'server {{.Server.Version}}, API {{.Server.APIVersion}}')"
