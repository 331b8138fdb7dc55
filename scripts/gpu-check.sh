#!/usr/bin/env bash
# One call on the GPU machine: build with CUDA (sm_90a), run every test (GPU tests included),
# generate the full-size zoo models on the GPU (smoke: few training steps), and time the
# Probe on the tiny zoo. Logs go to LOGDIR; a short table is printed last.
#   usage: scripts/gpu-check.sh LOGDIR   (after `source .carry/gpu-env.sh`, see shared/gpu/README.md)
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
logs=${1:?usage: gpu-check.sh LOGDIR}
mkdir -p "$logs"
build=${LOKA_BUILD_DIR:-/tmp/build-gpu}
source "$top/scripts/gpu_step_log.sh"

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"
step configure cmake -S "$top" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
     -DLOKA_ONNX_NODE_DIR="${LOKA_DEPS:-/opt/loka-deps}"/usr/share/libonnx-testdata/data/node
step build cmake --build "$build" -j"$(nproc)"
step ctest ctest --test-dir "$build" --output-on-failure -j8 --timeout 900
step cuda-tests "$build/tests/loka_cuda_tests"
for model in dlrm_dot dlrm_dcnv2 wukong dhen attention_ranker; do
  step "probe-$model" "$build/tools/loka-opt" "$top/models/zoo/$model/model.onnx" -o "$logs/$model.probe.onnx" \
       --calib "$top/models/zoo/$model/calib" --pipeline 'infer-shapes,probe' --quiet --report "$logs/$model.report.json"
done
step zoo-full timeout 240 python3 "$top/models/make_zoo.py" --size full --device cuda --out "$logs/zoo-full" --train-steps 50 --table-rows 20000 --threads 8

echo
echo "== gpu-check summary ($(cat "$logs/device.txt"), $(date -u +%F))"
print_steps
grep -h "tests passed\|tests failed" "$logs/ctest.log" | tail -2
# Everything in one archive: the device tool brings back only a few files.
tar -czf "$logs.tar.gz" --exclude='*.onnx' --exclude='calib' --exclude='eval' -C "$(dirname "$logs")" "$(basename "$logs")"
