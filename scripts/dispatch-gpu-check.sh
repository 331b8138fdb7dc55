#!/usr/bin/env bash
# =============================================================================
# scripts/dispatch-gpu-check.sh — what Dispatch must show on a GPU (issue 7):
#   1. loka-opt of every zoo model twice with a fresh perf DB: the second (warm)
#      run must be >= 10x faster in the dispatch pass (dispatch's device=auto
#      tunes on the GPU) and write the same model (the Probe's wall time aside);
#   2. dispatch_check on every output: for every GEMM shape at 512, 4096 and
#      16384 the dispatched kernel is no slower than the best BF16 candidate,
#      and the model-level budget holds.
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
echo "outputs, logs and the perf DB: $OUT"
exit $status
