#!/usr/bin/env bash
# Build Stoker's frozen one-folder bundle for this machine with PyInstaller (from PyPI):
#   Linux   dist/stoker/stoker        (run it; `dist/stoker/stoker setup` gets the engine)
#   macOS   dist/Stoker.app           (menu-bar app, no Dock icon)
#   Windows dist/Stoker/Stoker.exe    (no console; stoker-cli.exe beside it for the terminal)
# It uses its own venv (build/bundle-venv) with a plain (non-editable) `pip install .`.
# With STOKER_BUNDLE_CACHE=DIR a finished bundle is kept in DIR/<hash of its inputs> and
# reused when nothing that goes into it changed (CI keeps DIR outside the clone).
# Prints the bundle's folder, its size and how long the build took.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
start=$(date +%s)
case "$(uname -s)" in
  Darwin) out=dist/Stoker.app ;;
  MINGW*|MSYS*|CYGWIN*) out=dist/Stoker ;;
  *) out=dist/stoker ;;
esac

key=""
if [ -n "${STOKER_BUNDLE_CACHE:-}" ]; then
  # Everything that changes the bundle: the code, the spec, this script, the Python and the pins.
  key=$( { git ls-files -s app pyproject.toml packaging/stoker.spec packaging/bundle_entry.py \
             packaging/build-bundle.sh 2>/dev/null || find app pyproject.toml packaging -type f -exec sha256sum {} +;
           git diff HEAD -- app pyproject.toml packaging 2>/dev/null || true;
           "$PY" -c 'import sys, platform; print(sys.version, platform.machine())'; } | sha256sum | cut -c1-16)
  cached="$STOKER_BUNDLE_CACHE/$key/$(basename "$out")"
  if [ -d "$cached" ]; then
    rm -rf "$out"; mkdir -p dist; cp -a "$cached" "$out"
    echo "bundle: reused $cached (inputs unchanged, key $key)"
    echo "bundle: $out $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes), built in 0 s (cached)"
    exit 0
  fi
fi

venv=build/bundle-venv
if [ ! -x "$venv/bin/python" ] && [ ! -x "$venv/Scripts/python.exe" ]; then
  "$PY" -m venv "$venv"
fi
vpy="$venv/bin/python"; [ -x "$vpy" ] || vpy="$venv/Scripts/python.exe"
"$vpy" -m pip install -q --upgrade pip >/dev/null 2>&1 || true
extra=()
case "$(uname -s)" in Linux) ;; *) extra+=(pillow) ;; esac  # icon conversion to .icns/.ico
"$vpy" -m pip install -q "pyinstaller>=6.5" "${extra[@]}" .
rm -rf "$out" build/pyinstaller
"$vpy" -m PyInstaller --noconfirm --clean --log-level WARN --distpath dist --workpath build/pyinstaller \
  packaging/stoker.spec

if [ -n "$key" ]; then
  rm -rf "$STOKER_BUNDLE_CACHE"/*/  2>/dev/null || true  # keep only the newest bundle
  mkdir -p "$STOKER_BUNDLE_CACHE/$key"
  cp -a "$out" "$STOKER_BUNDLE_CACHE/$key/"
fi
echo "bundle: $out $(du -sh "$out" | cut -f1) ($(du -sb "$out" | cut -f1) bytes), built in $(( $(date +%s) - start )) s"
