#!/usr/bin/env bash
# Configures and builds LoKA into ${LOKA_BUILD_DIR:-build} (Release, Ninja), using every core.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
build=${LOKA_BUILD_DIR:-$top/build}
cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${LOKA_BUILD_TYPE:-Release} "$@" >/dev/null
cmake --build "$build" -j"$(nproc)"
