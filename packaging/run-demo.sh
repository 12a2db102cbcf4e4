#!/usr/bin/env bash
# Set-up command 1: from a clean clone, build the engine, fetch the demo model and run it.
# Opens the tray app when a tray exists, else runs headless and prints the endpoint.
# Extra arguments go to `stoker run` (e.g. --headless).
set -euo pipefail
cd "$(dirname "$0")/.."
bash packaging/system-deps.sh
bash packaging/install.sh
.venv/bin/stoker setup
exec .venv/bin/stoker run "$@"
