#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs what is missing (system
# packages, the project's virtual environment), then runs the job asked for.
#   ./dev.sh run     run the example model reply on the default backend
#   ./dev.sh test    the whole test suite (extra arguments go to pytest)
#   ./dev.sh test --fast  the everyday tier (tests/_tiers.py says what it leaves out)
#   ./dev.sh bench   the benchmarks, side by side with the peers
#   ./dev.sh docker  start the Docker engine and build the images
#   ./dev.sh vm [--as root|user|delegated] -- CMD...
#                    run CMD in a cgroup-v2 VM (qemu) on this machine's files
set -euo pipefail
cd "$(dirname "$0")"
# Bytecode caches are written (__pycache__, ignored by git), whatever the caller's environment
# says: with PYTHONDONTWRITEBYTECODE=1 (set in many container images) every interpreter a test
# starts (a worker, a server, the CLI, a zygote) compiled each module it imports from source
# again: ~12 s of each pytest worker's 17 s collection went to compiling autogen, ray and the tests
unset PYTHONDONTWRITEBYTECODE

say() { printf 'dev.sh: %s\n' "$*" >&2; }

install_system_packages() {
    # $1: "test" also installs what only the tests need (Debian's chromium,
    # which playwright drives in the playground's browser tests, and git); "bench",
    # Debian's numpy for the system Python.
    local need=()
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
    # Node.js: only the tests and benchmarks run JavaScript (run's example is Python)
    case "${1:-}" in test|bench) command -v node >/dev/null 2>&1 || need+=(nodejs) ;; esac
    command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
    # a block with the network on: its own namespace, egress by user-mode networking (jail/_egress.py)
    command -v slirp4netns >/dev/null 2>&1 || need+=(slirp4netns)
    [ "${1:-}" = test ] && { [ -x /usr/bin/chromium ] || need+=(chromium); }
    # test: git, with which tests/test_dev_run.py lists the checkout's files as a clone has them
    [ "${1:-}" = test ] && { command -v git >/dev/null 2>&1 || need+=(git); }
    # fast: the C and C++ toolchains, which the fast tier's judge, README and server tests compile with
    if [ "${1:-}" = fast ]; then
        [ -x /usr/bin/gcc ] || need+=(gcc)
        [ -x /usr/bin/g++ ] || need+=(g++)
    fi
    # test: the toolchains of the language table (src/execbox/_languages.py), Debian's own, in
    # /usr/bin where the sandbox's jail finds them (a rustup rustc under ~/.cargo is not one)
    if [ "${1:-}" = test ]; then
        local program package
        for pair in gcc:gcc g++:g++ go:golang-go rustc:rustc javac:default-jdk-headless tsc:node-typescript esbuild:esbuild \
            gdc:gdc mcs:mono-mcs \
            ruby:ruby php:php-cli lua:lua5.4 perl:perl Rscript:r-base-core; do
            program=${pair%%:*} package=${pair#*:}
            [ -x "/usr/bin/$program" ] || need+=("$package")
        done
    fi
    # bench: llm-sandbox falls back to /usr/bin/python3 in a checkout under /tmp (benchmarks/subjects.py)
    [ "${1:-}" = bench ] && { /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy); }
    [ ${#need[@]} -eq 0 ] && return 0
    say "installing system packages: ${need[*]}"
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { say "need root (or sudo) to install: ${need[*]}"; exit 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    # without Recommends: nodejs's alone are ~100 MB nothing here uses
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

pip_progress() {
    # pip's output, a line per package it fetches or builds (not its download bars), then the total
    grep --line-buffered -E '^(Collecting|Building|Installing|Successfully)' | sed -u 's/^/dev.sh: pip: /' >&2 || true
}

install_dev_extras() {
    # uv (a dev extra itself) installs the ~180 packages in parallel and links them from its
    # cache: ~5 s where pip takes ~45 s (2 cores), the same versions. uv does not read pip's
    # configuration, so it is given pip's find-links and certificate; where it fails (a
    # machine whose index is only in pip's configuration, no uv wheel) pip does it all.
    # --no-compile: the interpreter compiles what is imported when it is (most is never)
    local cert=${SSL_CERT_FILE:-${PIP_CERT:-}}
    if .venv/bin/python -m pip install --disable-pip-version-check --no-compile -q uv >/dev/null 2>&1 \
        && env ${cert:+SSL_CERT_FILE="$cert"} .venv/bin/uv pip install -q --python .venv/bin/python \
            ${PIP_FIND_LINKS:+--find-links "$PIP_FIND_LINKS"} -e '.[dev]'; then
        return 0
    fi
    say "uv could not install the extras (above); pip installs them (a few minutes)"
    .venv/bin/python -m pip install --disable-pip-version-check --no-compile -e '.[dev]' | pip_progress
}

setup_venv() {
    # $1: "run" installs execbox alone (its core and the sandbox need only
    # rich; ~30 MB), "dev" (the default) every extra the tests and
    # benchmarks use (~1 GB: Jupyter, Docker, Ray, AG2, AutoGen,
    # playwright...). A dev venv serves run too; a run venv grows into a
    # dev one in place. The real interpreter, not a launcher shim, so the
    # venv links to it directly.
    local what=${1:-dev} python hash
    python=$(python3 -c 'import sys; print(sys.executable)')
    hash=$(sha256sum < pyproject.toml | cut -c1-16)
    [ -f ".venv/.installed-dev-$hash" ] && return 0
    [ "$what" = run ] && [ -f ".venv/.installed-run-$hash" ] && return 0
    if [ ! -f ".venv/.installed-run-$hash" ]; then
        say "creating .venv with $python"
        rm -rf .venv
        "$python" -m venv .venv
    fi
    if [ "$what" = run ]; then
        say "installing execbox (core and sandbox: rich) into .venv"
        .venv/bin/python -m pip install --disable-pip-version-check --no-compile -e . | pip_progress
    else
        say "installing execbox with every development extra into .venv (~1 GB)"
        install_dev_extras
    fi
    touch ".venv/.installed-$what-$hash"
}

TESTER=execbox-tester
TESTER_HOME=/var/lib/execbox-tester

setup_tester() {
    # As root only: a non-root user (in the docker group) with a virtual
    # environment of Debian's python3, which that user can run (the root
    # venv's interpreter may live under /root). The security battery's
    # as_user attempts run again as this user (tests/security/test_as_user.py).
    [ "$(id -u)" = 0 ] || return 0
    if ! id "$TESTER" >/dev/null 2>&1; then
        say "creating the non-root test user $TESTER"
        useradd --system --create-home --home-dir "$TESTER_HOME" --shell /bin/bash "$TESTER"
    fi
    getent group docker >/dev/null 2>&1 && usermod -aG docker "$TESTER"
    command -v runuser >/dev/null 2>&1 || { say "runuser (util-linux) is missing"; exit 1; }
    local venv="$TESTER_HOME/venv" stamp
    stamp="$venv/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    say "setting up $venv for the non-root test user"
    rm -rf "$venv"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check '.[jupyter,docker,server]' \
        'pytest>=8' 'pytest-timeout>=2' matplotlib
    rm -rf build
    touch "$stamp"
    chmod -R a+rX "$venv"
}

engine_possible() {
    # dockerd makes mounts and namespaces: it needs CAP_SYS_ADMIN, which root
    # in a container started with the engine's defaults has not
    local capeff
    capeff=$(awk '/^CapEff:/ {print $2}' /proc/self/status)
    (( (16#${capeff:-0} >> 21) & 1 ))
}

setup_docker() {
    # The engine (installed and started when missing), then the images the
    # tests and benchmarks use; each is built once (content-addressed tags).
    # Where no engine can run (root without CAP_SYS_ADMIN: a default `docker
    # run`), none is installed and the Docker tests skip, saying why.
    if [ "$(id -u)" = 0 ] && ! engine_possible && ! docker version >/dev/null 2>&1; then
        if [ "${EXECBOX_REQUIRE:-}" = all ]; then
            say "EXECBOX_REQUIRE=all, but no Docker engine can run here: root without CAP_SYS_ADMIN"
            say "(a container started without --privileged); run the tests where dockerd can start"
            exit 1
        fi
        say "no Docker engine here: root without CAP_SYS_ADMIN (a container started without"
        say "--privileged) cannot start dockerd; the Docker tests will skip and say so"
        return 0
    fi
    scripts/docker-engine.sh
    local images=(
        ""                               # the base: Debian + Python
        "--package matplotlib"           # DockerPython(pip_packages=["matplotlib"])
        "--jupyter --package matplotlib" # DockerJupyterServer(packages=["matplotlib"])
        "--languages all"                # every toolchain of the language table, from Debian
    )
    for args in "${images[@]}"; do
        # shellcheck disable=SC2086
        .venv/bin/execbox images build $args >/dev/null
    done
}

setup_vm() {
    # As root only (the VM shares the whole root filesystem): qemu when
    # missing, then Debian's kernel, busybox and an initramfs in .cache/vm
    # (scripts/vm/build.sh, once). tests/test_cgroup2_vm.py boots it.
    [ "$(id -u)" = 0 ] || return 0
    if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
        say "installing system packages: qemu-system-x86"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-system-x86 >/dev/null
    fi
    scripts/vm/build.sh
}

pytest_workers() {
    # pytest-xdist workers: most tests wait (on a timeout, a container, a
    # VM, a server) rather than compute, so twice the cores, at least 4.
    # EXECBOX_TEST_WORKERS=0 runs in one process; arguments that name -n or
    # -p no:xdist themselves win.
    local arg
    for arg in "$@"; do
        case "$arg" in -n|-n*|--numprocesses*|no:xdist) return 0 ;; esac
    done
    local n=${EXECBOX_TEST_WORKERS:-$(( $(nproc) * 2 > 4 ? $(nproc) * 2 : 4 ))}
    # loadgroup for its scheduling (one test at a time to the next free worker, so the
    # longest, collected first, spread out); no test is in an xdist_group
    echo "-n $n --dist loadgroup"
}

run_all() {
    # Everything: on pytest-xdist's workers, then the tests marked "alone"
    # (soaks and bursts: they judge a load they make themselves, so none of
    # the workers' may sit beside them) in one process. Arguments that pick
    # the workers or a marker (-n, -p no:xdist, -m) run once, as asked.
    local workers arg first=0 second=0
    workers=$(pytest_workers "$@")
    for arg in "$@"; do [ "$arg" = -m ] && workers=""; done
    if [ -z "$workers" ]; then
        exec .venv/bin/python -m pytest "$@"
    fi
    # shellcheck disable=SC2086
    .venv/bin/python -m pytest $workers -m "not alone" "$@" || first=$?
    .venv/bin/python -m pytest -p no:xdist -m alone "$@" || second=$?
    # 5: that part selected no test (a path with none of them)
    for status in "$first" "$second"; do
        case "$status" in 0|5) ;; *) exit "$status" ;; esac
    done
    [ "$first" = 5 ] && [ "$second" = 5 ] && exit 5
    exit 0
}

job=${1:-}
shift || true
case "$job" in
    run)
        install_system_packages; setup_venv run
        say "running examples/reply.md on the default backend (.venv/bin/execbox run examples/reply.md)"
        exec .venv/bin/execbox run examples/reply.md "$@" ;;
    test)
        if [ "${1:-}" = --fast ]; then  # the everyday tier: no VM, Docker, browser or nested run (tests/_tiers.py)
            shift
            install_system_packages fast; setup_venv
            # the linters beside the tests, at the lowest priority: they take the CPU the tests'
            # workers leave while they wait on jails and servers (at the same priority they slowed
            # the tests by as much as they saved); their findings and status after the tests'
            lint=0 tests=0
            lint_log=$(mktemp)
            nice -n 19 scripts/lint.sh >"$lint_log" 2>&1 &
            lint_pid=$!
            # shellcheck disable=SC2046
            .venv/bin/python -m pytest $(pytest_workers "$@") -m "$(.venv/bin/python -c 'import tests._tiers as t; print(t.FAST_EXPRESSION)')" "$@" || tests=$?
            wait "$lint_pid" || lint=$?
            cat "$lint_log" >&2
            rm -f "$lint_log"
            [ "$lint" = 0 ] || { say "lint failed (scripts/lint.sh, above)"; exit "$lint"; }
            exit "$tests"
        fi
        install_system_packages test; setup_venv; setup_docker; setup_tester; setup_vm
        run_all "$@" ;;
    bench)
        install_system_packages bench; setup_venv; setup_docker
        exec .venv/bin/python benchmarks/run.py "$@" ;;
    setup)
        install_system_packages test; setup_venv ;;
    docker)
        install_system_packages; setup_venv; setup_docker ;;
    vm)
        install_system_packages; setup_venv; setup_tester; setup_vm
        exec scripts/vm/run.sh "$@" ;;
    *)
        say "usage: ./dev.sh run|test|bench|setup|docker|vm"; exit 2 ;;
esac
