// ============================================================================
// passes/dispatch/dispatch_pass.h — `dispatch`: per GEMM node and batch
// bucket, the fastest kernel candidate whose error fits the model budget.
//
// Does: for every Gemm / MatMul / ai.loka QuantizedGemm (gemm_problems.h) and
// every bucket (option buckets, default 512:4096:16384), asks a timer for each
// registry candidate's time and error — measured on this GPU through the perf
// DB (device=cuda, or auto when a GPU is usable) or the documented cost
// model (device=cpu, or auto without one, as in CI; docs/dispatch.md). A candidate whose error
// is no larger than what the node already spends (its FP8 recipe's error for
// QuantizedGemm, FP32's for the rest) is free: BF16 in place of FP8, any
// algorithm. Candidates that add error (TF32 or BF16 for an FP32 node, FP8
// FAST_ACCUM) are granted per node and level (TF32, then BF16: the marginal
// step), greedily by time saved per unit of added model error, while
// pin-precision's predicted error plus the added errors stays within --budget
// (pin-precision leaves its `reserve` share of the budget for this). A node's
// added model error is its Probe-measured FP8 site error scaled by the ratio
// of the candidate's GEMM error to FP8's (squared for a logloss budget;
// summed linearly over nodes, an upper bound); with --calib data both errors
// of that ratio are measured on the node's calibration inputs
// (calibration_errors.h), recorded as the node's "calibration_errors".
// Nodes pinned fp32 get no added error; pinned bf16 run BF16.
// Writes: per node annotation "kernel" (the choice at reference_bucket),
// "kernel_time_us", "kernel_runner_up", "kernel_runner_up_time_us",
// "kernel_precision", "kernel_source", and "kernels" per bucket; model
// "dispatch" (device, source, buckets, budget use); the "loka.kernels" plan
// the runtime reads (kernels/registry/kernel_plan.h); and on ai.loka nodes the
// attribute kernel = ["<rows>:<name>", ...] (rows: M × batch count).
// Requires: shape-inferred IR; pin-precision's annotations for any
// error-adding choice (without them only free candidates are used).
// Guarantees: the same model with the same perf DB (or the cost model) gives
// byte-identical output; every GEMM and norm node gets a kernel or a "kernel_reason".
// Norms: every LayerNormalization / ai.loka LayerNormQuant / ResidualLayerNorm
// (norm_problems.h) gets, per bucket, the fastest of LoKA's kernel and cuDNN's
// LayerNorm graphs (option cudnn_norm, GPU only) whose error matches LoKA's
// kernel's: they trade no precision. Annotated and planned as the GEMMs are,
// with "kernel_reason" where the CUDA runtime has no kernel for the form.
// Does not: change the graph's ops or weights, or measure model accuracy.
// ============================================================================
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "passes/dispatch/gemm_timer.h"
#include "passes/dispatch/norm_timer.h"
#include "passes/pass.h"

namespace loka {

/// Pass description: name "dispatch", options, statistics.
PassInfo dispatch_pass_info();
/// A fresh `dispatch` pass.
std::unique_ptr<Pass> make_dispatch_pass();

namespace dispatch {

struct DispatchOptions {
  std::vector<int64_t> buckets = {512, 4096, 16384};
  int64_t reference_bucket = 4096;  ///< the bucket whose choice is the node's "kernel"
  /// Spend the budget's headroom on error-adding kernels (TF32/BF16 on FP32 nodes, FAST_ACCUM
  /// beyond the FP8 recipe's own error); false keeps to choices that add no error.
  bool upgrades = true;
  /// Rows of each FP32 node's calibration inputs its TF32 / BF16 / FP8 GEMM errors are measured on
  /// (calibration_errors.h), when the compile has --calib data; 0: the autotuner's synthetic
  /// errors price upgrades alone.
  /// The run is the CPU runtime's: deterministic, so the plan stays byte-identical run to run.
  int64_t calibration_rows = 256;
};

/// Parses "512:4096:16384" (',' accepted too; positive, strictly ascending).
Result<std::vector<int64_t>> parse_buckets(const std::string& text);

/// The pass's work with given timers (tests pass the cost models or perf-DB
/// timers with a fake measurement). True when the IR or its annotations changed.
Result<bool> dispatch_kernels(ir::Graph& graph, PassContext& context, GemmTimer& timer, NormTimer& norm_timer,
                              const DispatchOptions& options);

}  // namespace dispatch
}  // namespace loka
