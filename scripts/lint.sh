#!/usr/bin/env bash
# Static checks, configured in pyproject.toml: ruff over the sources and the
# tests, then mypy over src/execbox. Exits non-zero on any finding; runs both
# so one report shows everything. Uses the project's .venv (./dev.sh sets it
# up) unless RUFF / MYPY name other executables.
set -uo pipefail
cd "$(dirname "$0")/.."

ruff=${RUFF:-.venv/bin/ruff}
mypy=${MYPY:-.venv/bin/mypy}
status=0

"$ruff" check src tests || status=1
"$ruff" format --check src tests || status=1
"$mypy" || status=1   # files = src/execbox, from pyproject.toml

exit "$status"
