// ============================================================================
// passes/mods/fuse_epilogue_quantize.h — `fuse-epilogue-quantize`: a DCN cross
// layer's QuantizedGemm writes the FP8 codes of its output for the FP8 GEMMs
// that read it.
//
// Why: a QuantizedGemm with a Multiplier (the DCN cross x₀ ⊙ (x W + b) + x)
// runs LoKA's own epilogue pass over Y on the GPU (cuBLASLt cannot multiply by
// x₀). The next cross layer's GEMM then quantizes Y again: a second pass that
// reads 4 bytes an element and writes 1, plus a launch. Written by the epilogue
// that already holds each element, the codes cost 1 byte an element. On
// DLRM-DCNv2 (Y [B, 3456]) that is three quantize passes of the 4096-row
// batch's ~56 MB each.
//
//   Y = QuantizedGemm(x, W, …, Multiplier=x₀, Residual=x) ─┬▶ QuantizedGemm(Y, W', …, s)
//                                                         └▶ (FP32 readers)
//   ==>
//   Y, Yq = QuantizedGemm(x, W, …, x₀, x, Y_scale=s) ─┬▶ QuantizedGemm(Yq, W', …, s)
//                                                     └▶ (FP32 readers of Y)
//
// Exact: Yq = Q(Y / s) (docs/loka_ops.md), which is what a float-X "tensor" reader
// with X_scale s quantizes, and what QuantizeLinear(Y, s, 0) writes: outputs are
// bit-identical before and after.
//
// Requires: shape-inferred IR. Runs after share-activation-quantize, whose
// QuantizeLinear of a Y read by several GEMMs this pass takes over.
// Matches: an ai.loka QuantizedGemm with input 5 (Multiplier) and one float32
// output Y; Y's readers that quantize it: QuantizedGemms at input 0 with the
// "tensor" recipe, a constant finite positive scalar X_scale and W on the FP8
// tensor cores (share-activation-quantize's rule), and QuantizeLinears to E4M3FN
// (scalar constant scale, zero point 0, saturating, its codes no graph output:
// that name is the model's interface). All of them must use one
// scale (bit for bit); with two scales nothing is fused (one would still read Y).
// Guarantees: the producer keeps its name, attributes, inputs and output Y (its
// FP32 readers and a graph output still read it); it gains input 7 (Y_scale, a
// new initializer) and output 1 "<Y>_fp8"; GEMM readers read Yq with their own
// X_scale, a QuantizeLinear's readers read Yq and the QuantizeLinear goes, with
// its annotation entry. The producer's entry gets "y_scale" and "feeds" (the
// GEMMs reading the codes, directly or through a Transpose).
// Does not: touch other QuantizedGemms (there cuBLASLt applies the epilogue in
// the GEMM, and Y would need a pass of its own to be encoded), or per-row readers.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-epilogue-quantize`.
PassInfo fuse_epilogue_quantize_pass_info();
/// A fresh `fuse-epilogue-quantize` pass.
std::unique_ptr<Pass> make_fuse_epilogue_quantize_pass();

}  // namespace loka
