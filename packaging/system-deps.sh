#!/usr/bin/env bash
# Debian/Ubuntu packages Stoker needs on a fresh machine: a compiler and CMake for the
# engine build, and the libraries Qt's xcb platform loads. With TESTS=1 also Xvfb and a
# tray host (trayer) for the UI tests. Skips what is already installed.
set -euo pipefail
pkgs=(build-essential cmake ninja-build git libgomp1 libegl1 libgl1 libxkbcommon-x11-0 libxcb-cursor0
      libxcb-icccm4 libxcb-keysyms1 libxcb-shape0 libxcb-randr0 libxcb-render-util0 libxcb-image0
      libxcb-xinerama0 libxcb-xkb1 libdbus-1-3 libfontconfig1 fonts-dejavu-core)
if [ "${TESTS:-0}" = 1 ]; then
  pkgs+=(xvfb xauth trayer desktop-file-utils)  # desktop-file-validate checks our .desktop files
fi
command -v dpkg >/dev/null || { echo "not a Debian-like system: install the equivalents of: ${pkgs[*]}"; exit 0; }
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
