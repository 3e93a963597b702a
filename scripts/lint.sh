#!/usr/bin/env bash
# Static checks, configured in pyproject.toml: ruff over the sources and the
# tests, then mypy over src/execbox. Exits non-zero on any finding; runs both
# so one report shows everything. Uses the project's .venv (./dev.sh sets it
# up) unless RUFF / MYPY name other executables.
set -uo pipefail
cd "$(dirname "$0")/.."

# mypy's cache outside the checkout, shared by every clone of this user: it checks each cached
# module by its content, so a fresh clone (or its new venv) takes it over: ~1 s, not ~21 s
export MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/execbox/mypy}
ruff=${RUFF:-.venv/bin/ruff}
mypy=${MYPY:-.venv/bin/mypy}
status=0

"$ruff" check src tests || status=1
"$ruff" format --check src tests || status=1
"$mypy" || status=1   # files = src/execbox, from pyproject.toml

exit "$status"
