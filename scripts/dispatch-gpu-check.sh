#!/usr/bin/env bash
# =============================================================================
# scripts/dispatch-gpu-check.sh — what Dispatch must show on a GPU (issue 7):
#   1. loka-opt of every zoo model twice with a fresh perf DB: the second (warm)
#      run must be >= 10x faster in the dispatch pass (dispatch's device=auto
#      tunes on the GPU) and write the same model (the Probe's wall time aside);
#   2. dispatch_check on every output: for every GEMM shape at 512, 4096 and
#      16384 the dispatched kernel is no slower than the best BF16 candidate,
#      and the model-level budget holds as predicted;
#   3. the budget on the eval sets: each output run on the GPU (loka-run
#      --device cuda, the dispatched kernels) against the FP32 model on the
#      CPU, eval logloss pooled over the labelled sets; the relative drift
#      must be within the model's logloss budget (annotation model.precision).
#      The same output on the CPU runtime is shown beside it: what the
#      precision choice spends, apart from the GPU's kernels.
# Usage: scripts/dispatch-gpu-check.sh [BUILD_DIR] (default build; needs
# loka-opt and dispatch_check built with CUDA). Prints a table; exits non-zero
# on any failure.
# =============================================================================
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=$(mktemp -d /tmp/dispatch-gpu-check.XXXXXX)
export LOKA_PERF_DB="$OUT/perfdb.json"
status=0
outputs=()
printf '%-20s %12s %12s %12s %12s %8s %s\n' model cold_s warm_s cold_disp_s warm_disp_s speedup identical
for dir in models/zoo/*/; do
  name=$(basename "$dir")
  [[ -f "$dir/model.onnx" ]] || continue
  for run in cold warm; do
    args=("$dir/model.onnx" -o "$OUT/$name.$run.onnx" --report "$OUT/$name.$run.json")
    [[ -d "$dir/calib" ]] && args+=(--calib "$dir/calib")
    "$BUILD/tools/loka-opt" "${args[@]}" > "$OUT/$name.$run.log" 2>&1 || { echo "$name: loka-opt ($run) failed:"; tail -5 "$OUT/$name.$run.log"; status=1; continue 2; }
  done
  read -r cold warm cold_d warm_d < <(python3 - "$OUT/$name.cold.json" "$OUT/$name.warm.json" <<'PY'
import json, sys
def times(path):
    report = json.load(open(path))
    dispatch = sum(p["seconds"] for p in report.get("passes", []) if p["pass"].startswith("dispatch"))
    return report.get("seconds", 0.0), dispatch
c, cd = times(sys.argv[1]); w, wd = times(sys.argv[2])
print(c, w, cd, wd)
PY
)
  same=no
  python3 - "$OUT/$name.cold.onnx" "$OUT/$name.warm.onnx" <<'PY' && same=yes
import json, sys, onnx
def comparable(path):
    model = onnx.load(path)
    meta = {p.key: p.value for p in model.metadata_props}
    notes = json.loads(meta.pop("loka.annotations", "{}"))
    notes.get("model", {}).get("probe", {}).pop("seconds", None)  # a wall time
    return model.graph.SerializeToString(), meta, notes
sys.exit(0 if comparable(sys.argv[1]) == comparable(sys.argv[2]) else 1)
PY
  speedup=$(python3 -c "print(f'{$cold_d / max($warm_d, 1e-9):.1f}')")
  printf '%-20s %12.2f %12.2f %12.3f %12.3f %8s %s\n' "$name" "$cold" "$warm" "$cold_d" "$warm_d" "${speedup}x" "$same"
  python3 -c "import sys; sys.exit(0 if $cold_d >= 10 * $warm_d else 1)" || { echo "  FAIL: warm dispatch is not 10x faster"; status=1; }
  [[ $same == yes ]] || { echo "  FAIL: cold and warm outputs differ"; status=1; }
  outputs+=("$OUT/$name.warm.onnx")
done
"$BUILD/dispatch_check" "${outputs[@]}" || status=1

echo
printf '%-20s %14s %14s %12s %12s %12s %s\n' model fp32_logloss gpu_logloss gpu_drift cpu_drift budget verdict
for warm in "${outputs[@]}"; do
  name=$(basename "$warm" .warm.onnx)
  dir=models/zoo/$name
  [[ -d "$dir/eval" ]] || { echo "$name: no eval sets"; status=1; continue; }
  "$BUILD/tools/loka-run" "$dir/model.onnx" --inputs "$dir/eval" --device cpu --outputs "$OUT/$name.fp32.out" > "$OUT/$name.fp32.log" 2>&1 &&
    "$BUILD/tools/loka-run" "$warm" --inputs "$dir/eval" --device cuda --outputs "$OUT/$name.gpu.out" > "$OUT/$name.gpu.log" 2>&1 &&
    "$BUILD/tools/loka-run" "$warm" --inputs "$dir/eval" --device cpu --outputs "$OUT/$name.cpu.out" > "$OUT/$name.cpu.log" 2>&1 ||
    { echo "$name: loka-run failed:"; tail -3 "$OUT/$name.fp32.log" "$OUT/$name.gpu.log" "$OUT/$name.cpu.log" 2>/dev/null; status=1; continue; }
  PYTHONPATH=models python3 - "$name" "$dir/eval" "$OUT/$name.fp32.out" "$OUT/$name.gpu.out" "$OUT/$name.cpu.out" "$warm" <<'PY' || status=1
import json, os, sys
import numpy as np, onnx
from onnx import TensorProto, numpy_helper
from loka_zoo.metrics import quality
name, eval_dir, fp32_dir, gpu_dir, cpu_dir, model = sys.argv[1:]
def read(path):
    proto = TensorProto()
    with open(path, "rb") as f:
        proto.ParseFromString(f.read())
    return numpy_helper.to_array(proto)
sets = sorted((d for d in os.listdir(eval_dir) if d.startswith("test_data_set_")), key=lambda d: int(d.rsplit("_", 1)[1]))
def probs(root):
    return np.concatenate([read(os.path.join(root, d, "output_0.pb")).reshape(-1) for d in sets])
labels = np.concatenate([read(os.path.join(eval_dir, d, "labels.pb")).reshape(-1) for d in sets])
fp32, gpu, cpu = (quality(probs(d), labels)["logloss"] for d in (fp32_dir, gpu_dir, cpu_dir))
meta = {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}
budget = json.loads(meta.get("loka.annotations", "{}")).get("model", {}).get("precision", {}).get("budget", "none")
limit = float(budget.split("=")[1]) if budget.startswith("logloss=") else None  # others: not a logloss check
drift = abs(gpu - fp32) / fp32
ok = limit is None or drift <= limit
print(f"{name:<20} {fp32:14.6f} {gpu:14.6f} {100 * drift:11.4f}% {100 * abs(cpu - fp32) / fp32:11.4f}% {budget:>12} "
      f"{'n/a' if limit is None else 'within' if ok else 'OVER'}")
sys.exit(0 if ok else 1)
PY
done
echo "outputs, logs and the perf DB: $OUT"
exit $status
