#!/usr/bin/env bash
# Configures and builds GATOS into build/ (Release with debug info).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${GATOS_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
