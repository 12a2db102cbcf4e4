#!/usr/bin/env bash
# Make .venv with Stoker and its test tools installed (idempotent). Used by the two
# set-up commands below; safe to run on its own.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/python -m pip install -q -e ".[test]"
