// ============================================================================
// passes/mods/center_norm_weights.h — `center-norm-weights`: LayerNorm-invariant
// weight centring.
//
// What: a GEMM whose output feeds a LayerNormalization over its output
// features computes y = x·W + b, and LayerNorm subtracts each row's mean over
// those features. So any per-input-row constant in W (W[k, n] = w[k, n] + a_k)
// and any constant in b adds x·a + c to every feature of a row and is removed
// exactly by the LayerNorm. The pass subtracts, per input row k, the mean of
// W[k, :] over the outputs, and the mean of the bias over the outputs: exact in
// FP32 (up to rounding of the subtraction), and it removes the common mode that
// FP8 error scales with (per-output-channel weight scales are set by the
// largest |W| of the column, so a large common offset a_k swamps the useful
// part of the weights; the Probe reports such a site as unsafe).
//
//        x ──▶ Gemm / MatMul (W, b constant) ──▶ [Add (constant c)] ──▶ LayerNormalization(axis=-1)
//      becomes
//        x ──▶ Gemm / MatMul (W - mean_n W, b - mean_n b) ──▶ [Add (c - mean_n c)] ──▶ LayerNormalization
//
// Requires: the GEMM is a Gemm (either transB; transA free) or a MatMul with a
// 2-D weight, its weight a float32 initializer (not a graph input); its output
// has exactly one reader, which is either the LayerNormalization (as X) or an
// Add of a float32 initializer whose output in turn is read only by the
// LayerNormalization; the LayerNormalization normalizes the last axis only
// (so the normalized dim is the GEMM's N); N >= 2.
// Guarantees: only initializers change (a shared one is copied for this node,
// see rewrite_helpers.h); graph structure, types and names are unchanged; rows
// that are already centred are left alone, so a second run changes nothing.
// A bias or added constant broadcast over the outputs (last dim 1) is already a
// pure common mode that adds no FP8 error; it is left as is.
// Does not: look through a residual Add of another activation (the common mode
// would then not be the LayerNorm's whole input), or centre weights behind
// Transpose/Cast chains (only direct initializers are rewritten).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `center-norm-weights`.
PassInfo center_norm_weights_pass_info();
/// A fresh `center-norm-weights` pass.
std::unique_ptr<Pass> make_center_norm_weights_pass();

}  // namespace loka
