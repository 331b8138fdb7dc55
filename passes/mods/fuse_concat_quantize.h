// ============================================================================
// passes/mods/fuse_concat_quantize.h — `fuse-concat-quantize`: a Concat whose
// every reader quantizes it with one scale becomes ai.loka ConcatQuant, which
// writes the codes of each input straight into its slice.
//
// Why: DHEN combines its five interaction modules with a Concat to
// [B, 34, 640] that one FP8 GEMM reads. On the GPU the Concat copies every
// input (4 bytes read and 4 written an element) and the GEMM's quantize pass
// reads the joined tensor again (4 read, 1 written): 13 bytes an element,
// about 1.2 GB a layer at batch 4096. Quantizing is elementwise with one
// scale, so it commutes with the Concat: each input is encoded into its slice
// of the codes (4 read, 1 written), and the FP32 concatenation never exists.
//
//   A ─┐                                   A ─┐
//   B ─┼▶ Concat ─▶ QuantizedGemm(·, W, s)   ==>   B ─┼▶ ai.loka::ConcatQuant(s) ─▶ QuantizedGemm(codes, W, s)
//   … ─┘                                   … ─┘
//
// Exact: QuantizedGemm's float-X "tensor" recipe with X_scale s quantizes X as
// QuantizeLinear(X, s, 0) does (docs/loka_ops.md), and ConcatQuant is that
// QuantizeLinear of the Concat: outputs are bit-identical.
//
// Requires: shape-inferred IR. Runs after share-activation-quantize (whose
// QuantizeLinear of a Concat read by several GEMMs it takes over) and before
// fuse-epilogue-quantize.
// Matches: an ONNX Concat with float32 inputs whose output is no graph output
// and whose every reader quantizes it with one scale (bit for bit): ai.loka
// QuantizedGemms at input 0 with the "tensor" recipe, a constant finite
// positive scalar X_scale and W on the FP8 tensor cores, and QuantizeLinears
// to E4M3FN (mods::e4m3_quantize_scale).
// Guarantees: the ConcatQuant keeps the Concat's name and axis, takes a new
// scalar initializer as Y_scale and writes "<output>_fp8"; GEMM readers read
// it with their own X_scale, a QuantizeLinear's readers read it and the
// QuantizeLinear goes, with its annotation entry. The ConcatQuant gets an
// entry with its op, precision "fp8_e4m3", "y_scale" and "feeds" (the GEMMs).
// Does not: touch a Concat with an FP32 reader (the FP32 concatenation is
// formed anyway; the GEMM's own quantize costs no more than a second pass),
// per-row readers, or the producers (a QuantizedGemm could write its codes
// into the slice itself; today each input is read once more in FP32).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-concat-quantize`.
PassInfo fuse_concat_quantize_pass_info();
/// A fresh `fuse-concat-quantize` pass.
std::unique_ptr<Pass> make_fuse_concat_quantize_pass();

}  // namespace loka
