#!/usr/bin/env bash
# Set-up command 2: from a clean clone, install everything and pass the tests.
# Builds (or reuses) the engine and the demo model in .stoker-home/ and the frozen bundle
# (dist/, reused from a cache outside the clone while its inputs are unchanged), then runs
# pytest under Xvfb with a tray host so the UI tests see a real system tray.
set -euo pipefail
cd "$(dirname "$0")/.."
TESTS=1 bash packaging/system-deps.sh
bash packaging/install.sh
# The gates, before anything slow: lint, then the import contract ([tool.importlinter] in
# pyproject.toml: the rooms' layers and the pure modules' forbidden imports).
.venv/bin/ruff check .
.venv/bin/lint-imports
# Types: [tool.mypy] in pyproject.toml (app/stoker; the pure modules with the strict flags).
.venv/bin/mypy
export STOKER_TEST_HOME="$PWD/.stoker-home"
# --rpc: rpc-server and the ggml libraries with RPC (40 steps, about 1 min on 2 cores).
STOKER_HOME="$STOKER_TEST_HOME" .venv/bin/stoker setup --rpc
# The image engine (sd-server): ~12 min on 2 cores the first time, reused after that.
STOKER_HOME="$STOKER_TEST_HOME" .venv/bin/stoker setup --image
export STOKER_REQUIRE_ENGINE=1   # engine tests fail instead of skipping
export STOKER_REQUIRE_IMAGE_ENGINE=1
# The frozen bundle for tests/ui/test_bundle.py (about 2 min to build, seconds when cached).
STOKER_BUNDLE_CACHE="${STOKER_BUNDLE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stoker-ci/bundle}" \
  bash packaging/build-bundle.sh
export STOKER_BUNDLE="$PWD/$(case "$(uname -s)" in Darwin) echo dist/Stoker.app/Contents/MacOS/Stoker ;;
                              *) echo dist/stoker/stoker ;; esac)"
export STOKER_REQUIRE_BUNDLE=1
exec .venv/bin/python -m tests.xvfb_run .venv/bin/python -m pytest "$@"
