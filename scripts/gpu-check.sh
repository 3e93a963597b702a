#!/usr/bin/env bash
# The GPU check (scripts/gpu_check.py says what it runs): on a host with an
# NVIDIA GPU, the driver and bubblewrap; this checkout's execbox, no install.
#   scripts/gpu-check.sh [--blocks N] [--dry-run]
# Set OUT to a folder to get gpu-check.json there as well.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x "$here/.venv/bin/python" ]; then python="$here/.venv/bin/python"; else python="$(command -v python3)"; fi
fi
command -v bwrap >/dev/null 2>&1 || echo "gpu-check: bubblewrap (bwrap) is not on PATH: the sandbox's rows will say so" >&2
PYTHONPATH="$here/src${PYTHONPATH:+:$PYTHONPATH}" exec timeout 230 "$python" "$here/scripts/gpu_check.py" "$@"
