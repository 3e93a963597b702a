#!/usr/bin/env bash
# The newcomer's scenario (issue 40): a minimal Debian bookworm container
# started with the engine's defaults (`docker run IMAGE`, no flags), root,
# this checkout copied into /root/execbox, the README's commands run there.
#
#   scripts/fresh-container.sh image        build the image (once): Debian's
#                                           minbase, no Python, as debian:bookworm-slim
#   scripts/fresh-container.sh run [-- CMD] ./dev.sh run, then `execbox doctor`
#                                           (or CMD) in a fresh container
#   scripts/fresh-container.sh test-fast    ./dev.sh test --fast in a fresh container
#                                           (~1 GB of packages; tens of minutes)
#   scripts/fresh-container.sh test         ./dev.sh test (the whole suite) in a fresh
#                                           container: no Docker engine there (skipped)
#   scripts/fresh-container.sh shell        a shell in a fresh container, the checkout in /root
#
# EXTRA_DOCKER_OPTS: more `docker run` options (e.g. the full-isolation ones:
# --cap-add SYS_ADMIN --security-opt seccomp=unconfined --security-opt
# apparmor=unconfined --security-opt systempaths=unconfined).
# KEEP=1 leaves the container (its name is printed) for a look inside.
# FRESH_REF=COMMIT copies that commit (git archive) in place of the working tree.
#
# Only what this machine's own network needs is passed in, never an option
# that changes the container's confinement: where HTTPS goes through a proxy
# with its own certificate authority, the host's CA bundle (PIP_CERT,
# SSL_CERT_FILE); apt fetches over HTTP from deb.debian.org.
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${FRESH_IMAGE:-execbox/fresh-debian:bookworm-1}
MIRROR=${EXECBOX_DEBIAN_MIRROR:-http://deb.debian.org/debian}
say() { printf 'fresh-container: %s\n' "$*" >&2; }

build_image() {
    docker image inspect "$IMAGE" >/dev/null 2>&1 && return 0
    if docker image inspect debian:bookworm-slim >/dev/null 2>&1 || docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
        say "tagging debian:bookworm-slim as $IMAGE"
        docker tag debian:bookworm-slim "$IMAGE"
        return 0
    fi
    # no registry: Debian's minbase (what the official slim image is made of), from the mirror
    [ "$(id -u)" = 0 ] || { say "building $IMAGE needs root (debootstrap)"; exit 1; }
    command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || {
        say "building $IMAGE needs debootstrap: apt-get install debootstrap"; exit 1; }
    local work
    work=$(mktemp -d /var/tmp/execbox-fresh-XXXXXX)
    trap 'rm -rf "$work"' RETURN
    say "debootstrap bookworm (minbase) from $MIRROR into $work"
    /usr/sbin/debootstrap --variant=minbase bookworm "$work/rootfs" "$MIRROR" >"$work/log" 2>&1 || {
        tail -20 "$work/log" >&2; exit 1; }
    rm -f "$work/rootfs/etc/apt/sources.list"
    cat >"$work/rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    rm -rf "$work/rootfs/var/lib/apt/lists/"* "$work/rootfs/var/cache/apt/archives/"*.deb
    say "importing it as $IMAGE"
    tar -C "$work/rootfs" --numeric-owner -c . | docker import \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'CMD ["bash"]' - "$IMAGE" >/dev/null
}

CONTAINER=""
cleanup() { [ -n "$CONTAINER" ] && [ "${KEEP:-0}" != 1 ] && docker rm -f "$CONTAINER" >/dev/null 2>&1; true; }

start_container() {
    # the engine's defaults: no --privileged, no --cap-add, no --security-opt (but EXTRA_DOCKER_OPTS)
    local opts=(-d --label execbox.test=fresh-container)
    local ca=/etc/ssl/certs/ca-certificates.crt
    if [ -f "$ca" ]; then
        opts+=(-v "$ca:/etc/execbox-host-ca.crt:ro" -e PIP_CERT=/etc/execbox-host-ca.crt
               -e SSL_CERT_FILE=/etc/execbox-host-ca.crt)
    fi
    # shellcheck disable=SC2206
    opts+=(${EXTRA_DOCKER_OPTS:-})
    # bash as PID 1, as a newcomer's `docker run -it debian bash` has it (it reaps orphans; sleep would not)
    CONTAINER=$(docker run "${opts[@]}" "$IMAGE" bash -c 'while :; do sleep 3600; done')
    trap cleanup EXIT
    say "container ${CONTAINER:0:12} ($IMAGE${EXTRA_DOCKER_OPTS:+, $EXTRA_DOCKER_OPTS})"
    docker exec "$CONTAINER" mkdir -p /root/execbox
    if [ -n "${FRESH_REF:-}" ]; then  # a commit, as `git clone` of it leaves it
        git archive --format=tar "$FRESH_REF" | docker exec -i "$CONTAINER" tar -x -C /root/execbox
        return 0
    fi
    # the working tree as `git clone` would leave it: tracked and untracked files, not the ignored ones
    git ls-files -z --cached --others --exclude-standard \
        | while IFS= read -r -d '' f; do if [ -e "$f" ] || [ -L "$f" ]; then printf '%s\0' "$f"; fi; done \
        | tar --null -T - --owner=0 --group=0 -c | docker exec -i "$CONTAINER" tar -x -C /root/execbox
}

in_container() {  # a login shell as root in the checkout; prints the status and time of each command
    local began status
    began=$(date +%s)
    status=0
    docker exec -w /root/execbox "$CONTAINER" bash -c "$1" || status=$?
    printf 'FRESH-RESULT %s exit=%s seconds=%s\n' "$1" "$status" "$(( $(date +%s) - began ))"
    return "$status"
}

job=${1:-run}
shift || true
case "$job" in
    image) build_image ;;
    run)
        build_image; start_container
        status=0
        in_container "./dev.sh run" || status=$?
        if [ "${1:-}" = -- ]; then shift; in_container "$*" || status=$?
        else in_container ".venv/bin/execbox doctor" || status=$?; fi
        exit "$status" ;;
    test-fast)
        build_image; start_container
        in_container "./dev.sh test --fast $*" ;;
    test)
        build_image; start_container
        in_container "./dev.sh test $*" ;;
    shell)
        build_image; KEEP=1 start_container
        say "docker exec -it -w /root/execbox $CONTAINER bash   (docker rm -f $CONTAINER when done)" ;;
    *) say "usage: scripts/fresh-container.sh image|run [-- CMD]|test-fast|test [PYTEST ARGS]|shell"; exit 2 ;;
esac
