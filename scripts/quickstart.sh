#!/usr/bin/env bash
# Quick start, step 1: install dependencies, build, and run LoKA on the bundled DLRM-DCNv2 model,
# comparing its outputs with onnxruntime's reference outputs.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
build=${LOKA_BUILD_DIR:-$top/build}
model="$top/models/zoo/dlrm_dcnv2"
echo "== loka-run on $model (CPU reference runtime vs onnxruntime FP32 outputs)"
"$build/tools/loka-run" "$model/model.onnx" --inputs "$model/eval" --compare "$model/eval" --tol 1e-5
