// ============================================================================
// passes/dispatch/calibration_errors.h — what each arithmetic a GEMM node may
// run in costs on the node's own calibration inputs.
//
// Dispatch prices a TF32 or BF16 kernel for a node the Probe left FP32 by
// scaling the node's Probe-measured FP8 model error by (that kernel's GEMM
// error / FP8's GEMM error), squared for a logloss budget. The autotuner's
// errors are measured on synthetic operands (normal activations, weights
// N(0, 1/K)), where every value sits well inside FP8's range; a model's
// activations (outliers, wide dynamic range) move FP8's error, and so the
// ratio, where BF16's and TF32's relative rounding barely moves. So the ratio
// is taken here, on the node's inputs from the calibration data: the model is
// run (probe::run_tapped) with each node's operands tapped, and for a sample
// of rows the node's GEMM is summed in double from
//   - the FP32 operands (the reference);
//   - both operands rounded to BF16 and to TF32 (round to nearest even: the
//     runtime's casts; TF32 keeps 10 mantissa bits);
//   - the operands quantized by the node's FP8 recipe exactly as the Probe
//     measured it (kernels/cpu/fp8_quantize.h: static per-tensor scales from
//     its annotation, or per-row / per-channel dynamic ones);
// each family's error is the relative L2 against the reference. Summing in
// double leaves only the operands' rounding, which is what tells the
// families apart (FP32 summation-order differences are orders smaller).
//
// The times still come from the autotuner; its synthetic error of a
// candidate over its family's best tells an algorithm that sums differently
// (split-K), and scales the calibration figure (dispatch_pass.cc).
// ============================================================================
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>

#include "kernels/registry/gemm_kernel_key.h"
#include "loka/engine.h"
#include "loka/status.h"
#include "loka/tensor.h"
#include "loka/test_data.h"
#include "passes/ir/graph.h"

namespace loka::dispatch {

/// The FP8 recipe a node's FP8 error was measured with (the Probe's recipe names).
struct Fp8RecipeSpec {
  enum class Kind { kE4M3Tensor, kE4M3Row, kE5M2Tensor };
  Kind kind = Kind::kE4M3Tensor;
  bool activation_matmul = false;  ///< W is an activation: quantized as the Probe quantizes a second activation
  float scale_a = 1.0f;            ///< per-tensor scale of X (kE4M3Tensor: E4M3; kE5M2Tensor: E5M2)
  float scale_b = 1.0f;            ///< per-tensor scale of an activation W (same formats)
};

/// Parses "e4m3_tensor", "e4m3_row" or "e5m2_tensor".
Result<Fp8RecipeSpec::Kind> parse_fp8_recipe(const std::string& name);

/// Relative L2 GEMM errors of each arithmetic; NaN where not measured.
struct FamilyErrors {
  static constexpr double kUnmeasured = std::numeric_limits<double>::quiet_NaN();
  double fp8 = kUnmeasured, bf16 = kUnmeasured, tf32 = kUnmeasured;
  int64_t rows = 0;  ///< output rows summed (over every batch of a batched MatMul)
};

/// The errors of X · W for X [..., M, K] and W as `layout` stores it (kNT: [N, K]; kNN: [K, N];
/// kBatched: [..., K, N] with X's leading dims), on the first rows of X (whole batches of a
/// batched MatMul) up to `max_rows`. The FP8 operands are quantized over the whole tensors, as
/// the Probe does. An error names the node when the shapes do not multiply.
Result<FamilyErrors> gemm_family_errors(const std::string& node, const Tensor& x, const Tensor& w,
                                        kernels::GemmLayout layout, const Fp8RecipeSpec& recipe, int64_t max_rows);

/// One node to measure: X is its input 0, W its input 1 (an initializer, or tapped).
struct CalibrationGemm {
  const ir::Node* node = nullptr;
  kernels::GemmLayout layout = kernels::GemmLayout::kNT;
  Fp8RecipeSpec recipe;
};

struct CalibrationErrorOptions {
  Device device = Device::kCpu;  ///< where the tapped model runs
  int64_t max_rows = 256;        ///< rows of each node's GEMM summed (of the first calibration batch)
};

/// Errors by node name.
using ErrorsByNode = std::map<std::string, FamilyErrors>;

/// Every node's errors on the first calibration batch of `reader`. Errors name the node, the value
/// or the data set.
Result<ErrorsByNode> measure_calibration_errors(const ir::Graph& graph, std::span<const CalibrationGemm> gemms,
                                                const DataSetReader& reader, const CalibrationErrorOptions& options);

}  // namespace loka::dispatch
