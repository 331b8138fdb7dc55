// ============================================================================
// passes/mods/share_activation_quantize.h — `share-activation-quantize`: one
// QuantizeLinear for every FP32 activation that several FP8 GEMMs quantize
// with the same static scale.
//
// Why: a QuantizedGemm with a float X quantizes it itself, so an activation
// read by k such GEMMs (DHEN's ensemble input feeds its Q, K, V and MLP
// projections; a layer output feeds several towers) is read in FP32 and
// quantized k times: on the GPU, k quantize kernels each reading 4 bytes and
// writing 1 per element. With one standard QuantizeLinear (E4M3FN output,
// saturating) the codes are written once and every GEMM reads 1 byte per
// element, already quantized.
//
//   X ─┬▶ QuantizedGemm(X, W0, …, s)         X ─▶ QuantizeLinear(X, s, 0) ─▶ Xq ─┬▶ QuantizedGemm(Xq, W0, …, s)
//      └▶ QuantizedGemm(X, W1, …, s)   ==>                                       └▶ QuantizedGemm(Xq, W1, …, s)
//
// The same reasoning moves the quantize above a Transpose that only such GEMMs read (Wukong's
// interaction layers transpose every layer's [B, N, D] input for an FP8 GEMM): the transpose then
// moves 1-byte codes instead of 4-byte floats, and the GEMM's quantize pass goes.
//
//   X ─▶ Transpose ─▶ QuantizedGemm(·, W, …, s)  ==>  X ─▶ QuantizeLinear(X, s, 0) ─▶ Transpose ─▶ QuantizedGemm(·, W, …, s)
//
// Exact: QuantizedGemm's float-X "tensor" recipe is D(Q(X / s)) · s
// (docs/loka_ops.md) and its FP8-X form is D(Xq) · s with Xq = Q(X / s),
// QuantizeLinear's definition, so outputs are bit-identical; quantizing is
// elementwise, so it commutes with a Transpose.
//
// Requires: shape-inferred IR (the codes' type is X's shape with E4M3FN).
// Matches: readers at input 0 of ai.loka QuantizedGemm with act_recipe
// "tensor", a constant, finite, positive scalar X_scale and W [N, K] with K
// and N multiples of 16 (the FP8 tensor cores' rule; other GEMMs run
// emulated or in BF16, which read float X as cheaply); readers are
// grouped by the scale's exact value and every group of two or more gets its
// own QuantizeLinear (other readers of X, e.g. FP32 ops or a per-row GEMM,
// keep reading X); a group of one reads codes already made for a Transpose
// of X at that scale. X itself must be float32. One X and scale get one
// QuantizeLinear whatever reads its codes.
// A Transpose is rewritten when every reader of its output is such a GEMM
// and all use one scale (one reader is enough: the transpose itself gets cheaper).
// Guarantees: the graph's ai.onnx opset is raised to 19 (QuantizeLinear's
// FP8 form), or 21 for a Transpose of codes, when older and upgradable,
// otherwise that rewrite is not made; a new QuantizeLinear is named
// "<X>_quantize" (made unique), a Transpose of codes keeps the old one's name
// and perm; each gets an annotation entry with its op, precision "fp8_e4m3",
// the scale, and "feeds" (the GEMMs it feeds).
// Does not: merge different scales (that would change a reader's rounding:
// fuse-layernorm-quant does it where a LayerNorm produces X), or touch
// per-row readers (their scale is computed per row at run time).
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `share-activation-quantize`.
PassInfo share_activation_quantize_pass_info();
/// A fresh `share-activation-quantize` pass.
std::unique_ptr<Pass> make_share_activation_quantize_pass();

}  // namespace loka
