#!/usr/bin/env bash
# Configures (once) and builds Varuna into ${BUILD_DIR:-build} with at most 2
# jobs (a TU with torch headers needs over 1 GB).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
if [[ ! -f "$BUILD_DIR/build.ninja" ]]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >"$BUILD_DIR.configure.log" 2>&1 || {
    cat "$BUILD_DIR.configure.log"; exit 1; }
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-2}"
