#!/usr/bin/env bash
# Quick start, step 1: install dependencies, build, and run LoKA on the bundled DLRM-DCNv2 model:
# the CPU runtime against onnxruntime's reference outputs, then the Probe (loka-opt) and its
# per-site FP8 verdicts (loka-inspect).
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
"$top/scripts/install-deps.sh"
"$top/scripts/build.sh"
build=${LOKA_BUILD_DIR:-$top/build}
model="$top/models/zoo/dlrm_dcnv2"
echo "== loka-run on $model (CPU reference runtime vs onnxruntime FP32 outputs)"
"$build/tools/loka-run" "$model/model.onnx" --inputs "$model/eval" --compare "$model/eval" --tol 1e-5
echo "== loka-opt: canonicalize, Probe (per-site FP8 error, 95% intervals), choose FP8 sites, write FP8 weights"
"$build/tools/loka-opt" "$model/model.onnx" -o "$build/dlrm_dcnv2.loka.onnx" --calib "$model/calib"
echo "== loka-inspect: per-site precision and the most FP8-sensitive sites"
"$build/tools/loka-inspect" "$build/dlrm_dcnv2.loka.onnx" --sort error | tail -7
