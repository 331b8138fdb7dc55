// ============================================================================
// passes/mods/fuse_epilogue_quantize.h — `fuse-epilogue-quantize`: a
// QuantizedGemm writes the FP8 codes of its output for the FP8 GEMMs that read it.
//
// Why: a reader that quantizes Y (a "tensor"-recipe QuantizedGemm, or the
// QuantizeLinear share-activation-quantize put before several) reads 4 bytes an
// element and writes 1, in a pass and a launch of its own. Two producers can
// write the codes for less:
//  - A DCN cross layer (a Multiplier) runs LoKA's own epilogue pass over Y on
//    the GPU (cuBLASLt cannot multiply by x₀); written by that pass, which
//    already holds each element, the codes cost 1 byte an element. On
//    DLRM-DCNv2 (Y [B, 3456]) that is three quantize passes of the 4096-row
//    batch's ~56 MB each. Its FP32 readers (the next layer's Residual) keep Y.
//  - Any QuantizedGemm on the FP8 tensor cores whose Y *only* quantizing readers
//    read: Y then goes unread, the ONNX export omits it (docs/loka_ops.md), and
//    the GPU's own op writes 2 bytes an element (BF16 sums) and reads them back
//    once to write the codes: 5 bytes an element where cuBLASLt's FP32 Y and the
//    reader's quantize moved 9. The attention ranker's FFN hidden layer
//    ([B·40, 512] at d = 128) is such a GEMM in every FP8 block.
//
//   Y = QuantizedGemm(x, W, …) ─┬▶ QuantizedGemm(Y, W', …, s)
//                               └▶ (FP32 readers: a cross layer's only)
//   ==>
//   Y, Yq = QuantizedGemm(x, W, …, Y_scale=s) ─┬▶ QuantizedGemm(Yq, W', …, s)
//                                              └▶ (FP32 readers of Y)
//
// Exact: Yq = Q(Y / s) (docs/loka_ops.md), which is what a float-X "tensor" reader
// with X_scale s quantizes, and what QuantizeLinear(Y, s, 0) writes: outputs are
// bit-identical before and after on the CPU runtime. (The GPU's op rounds each
// sum to BF16 before its epilogue: 2^-8 of a sum, far below the FP8 error.)
//
// Requires: shape-inferred IR. Runs after share-activation-quantize, whose
// QuantizeLinear of a Y read by several GEMMs this pass takes over.
// Matches: an ai.loka QuantizedGemm with one float32 output Y, and either input 5
// (Multiplier) or W of a shape the FP8 tensor cores take (K and N multiples of
// 16), Y no graph output and every reader of Y quantizing; Y's quantizing
// readers: QuantizedGemms at input 0 with the
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
// Does not: touch a QuantizedGemm without a Multiplier whose Y an FP32 reader
// also reads (cuBLASLt's epilogue writes that Y, and the codes would need a pass
// over it anyway), nor per-row readers.
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
