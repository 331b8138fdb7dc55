// ============================================================================
// passes/mods/migrate_outliers.h — `migrate-outliers`: SmoothQuant-style
// migration of activation outlier channels into the weights.
//
// What: a weight GEMM y = x·W whose activation x has a few channels far larger
// than the rest wastes FP8's range on them under a per-tensor activation scale
// (the e4m3_tensor recipe): the static scale follows the outliers and the other
// channels lose precision. For such a site the pass picks per-input-channel
// factors
//     s_k = max|X_k|^alpha / max|W_k|^(1-alpha)        (W_k: row k of W, over outputs)
// and rewrites x' = x / s, W' = diag(s)·W, so x'·W' = x·W. Dividing x by s is
// folded into x's producer, where it is exact:
//   * LayerNormalization (last axis): gamma_k /= s_k, beta_k /= s_k;
//   * Gemm with constant weights: output channel k of its weight and bias /= s_k.
// max|X_k| comes from running the FP32 model on the --calib data through the
// runtime (no executor of our own), with the site inputs tapped as model
// outputs (passes/probe/tapped_run.h): on the GPU when there is one (`device`).
//
//        P (LayerNorm or Gemm) ──x──▶ Gemm / MatMul(W)
//      becomes
//        P' (gamma/s, beta/s  or  W_p/s, b/s) ──x/s──▶ Gemm / MatMul(diag(s)·W)
//
// Requires: calibration data (CompileSettings::calibration_data) when the
// graph has a candidate site (without one it reports "unchanged"); a consumer
// Gemm (transA 0, either transB) or MatMul with a 2-D float32 initializer
// weight reading x as its activation; x read by that node alone and produced
// (as output 0) by a last-axis LayerNormalization with initializer gamma/beta
// of length K, or by a Gemm with initializer weights (and bias, if any).
// Only sites whose channel amax is skewed, max_k / median_k > `min_ratio`, move.
// Guarantees: exact in FP32 up to rounding; with `pow2` (default) every s_k is
// a power of two, so every scaled product is bit-identical to the original
// (barring under/overflow). Only initializers change (shared ones are copied);
// the consumer's annotation entry records the producer and the channel amax
// skew before and after under "migrated_outliers".
// Does not: fold through other ops (Relu, Add, residuals), touch producers with
// other readers (the fold would change them), or migrate activation-activation
// MatMuls; it does not re-run calibration after rewriting (the Probe does).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options (alpha, min_ratio, batches, pow2, device) and statistics of `migrate-outliers`.
PassInfo migrate_outliers_pass_info();
/// A fresh `migrate-outliers` pass.
std::unique_ptr<Pass> make_migrate_outliers_pass();

}  // namespace loka
