#!/usr/bin/env bash
# One entry point for a fresh Debian machine: installs what is missing (system
# packages, the project's virtual environment), then runs the job asked for.
#   ./dev.sh run     run the example model reply on the default backend
#   ./dev.sh test    the whole test suite (extra arguments go to pytest)
#   ./dev.sh bench   the benchmarks, side by side with the peers
#   ./dev.sh docker  start the Docker engine and build the images
set -euo pipefail
cd "$(dirname "$0")"

say() { printf 'dev.sh: %s\n' "$*" >&2; }

install_system_packages() {
    local need=()
    command -v python3 >/dev/null 2>&1 || need+=(python3)
    python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
    command -v node >/dev/null 2>&1 || need+=(nodejs)
    command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
    [ ${#need[@]} -eq 0 ] && return 0
    say "installing system packages: ${need[*]}"
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || { say "need root (or sudo) to install: ${need[*]}"; exit 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}

setup_venv() {
    # The real interpreter, not a launcher shim, so the venv links to it directly.
    local python stamp
    python=$(python3 -c 'import sys; print(sys.executable)')
    stamp=".venv/.installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
    [ -f "$stamp" ] && return 0
    say "setting up .venv with $python"
    rm -rf .venv
    "$python" -m venv .venv
    .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev]'
    touch "$stamp"
}

setup_docker() {
    # The engine (installed and started when missing), then the images the
    # tests and benchmarks use; each is built once (content-addressed tags).
    scripts/docker-engine.sh
    local images=(
        ""                               # the base: Debian + Python
        "--package matplotlib"           # DockerPython(pip_packages=["matplotlib"])
        "--jupyter --package matplotlib" # DockerJupyterServer(packages=["matplotlib"])
    )
    for args in "${images[@]}"; do
        # shellcheck disable=SC2086
        .venv/bin/execbox images build $args >/dev/null
    done
}

job=${1:-}
shift || true
case "$job" in
    run)
        install_system_packages; setup_venv
        exec .venv/bin/execbox run examples/reply.md "$@" ;;
    test)
        install_system_packages; setup_venv; setup_docker
        exec .venv/bin/python -m pytest "$@" ;;
    bench)
        install_system_packages; setup_venv; setup_docker
        exec .venv/bin/python benchmarks/run.py "$@" ;;
    setup)
        install_system_packages; setup_venv ;;
    docker)
        install_system_packages; setup_venv; setup_docker ;;
    *)
        say "usage: ./dev.sh run|test|bench|setup|docker"; exit 2 ;;
esac
