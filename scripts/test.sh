#!/usr/bin/env bash
# Quick start, step 2 (and CI): install dependencies, build, and run every test.
# GPU tests skip with a printed reason on machines without a CUDA device.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
build=${LOKA_BUILD_DIR:-$top/build}
ctest --test-dir "$build" --output-on-failure -j"$(nproc)" --timeout 900
