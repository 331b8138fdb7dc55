// ============================================================================
// passes/mods/fuse_residual_layernorm.h — `fuse-residual-layernorm`: a
// residual Add read only by a LayerNormalization becomes one
// ai.loka::ResidualLayerNorm (docs/loka_ops.md).
//
// Why: post-norm blocks (Wukong's interaction layers, DHEN's ensemble layers)
// end in LayerNorm(x + residual). As two ops the GPU reads both terms and
// writes their sum, then reads the sum again to normalize it: three full
// passes before the normalized write, against two when the norm adds the
// terms as it stages each row (at Wukong's batch 4096 the Adds alone were
// 13% of its time on an H100). Adds whose term is a GEMM's output are not
// seen here: fuse-gemm-epilogue has already put them in that GEMM's epilogue.
//
//   a ─┐                                   a ─┐
//      Add ─▶ LayerNormalization ─▶ y  ==>    ResidualLayerNorm ─▶ y
//   b ─┘        (scale, bias)              b ─┘   (scale, bias)
//
// Requires: shape-inferred IR.
// Matches: an Add of two float32 tensors of one shape (no broadcasting:
// equal ranks, and per dim the same known size or the same named dim), whose output is read only by input 0 of one
// LayerNormalization over the last axis with stash_type 1, Scale (and B) of
// exactly [C], whose Mean and InvStdDev outputs are unused; the sum is no
// graph output.
// Guarantees: bit-identical outputs (the same float Add, then the same row
// arithmetic); the fused node keeps the LayerNormalization's name, output and
// epsilon, and its annotation entry gets op "ResidualLayerNorm", precision
// "fp32" and "from" [the Add, the LayerNormalization] (or what their entries
// had absorbed before), and the Add's entry goes; opset ai.loka 1 is imported.
// Does not: fuse a LayerNorm that emits FP8 (fuse-layernorm-quant, which runs
// first, has made it a LayerNormQuant), broadcasting Adds, or an Add read by
// anything else (its sum must then exist in memory anyway).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-residual-layernorm`.
PassInfo fuse_residual_layernorm_pass_info();
/// A fresh `fuse-residual-layernorm` pass.
std::unique_ptr<Pass> make_fuse_residual_layernorm_pass();

}  // namespace loka
