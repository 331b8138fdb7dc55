// ============================================================================
// passes/mods/fuse_gemm_epilogue.h — `fuse-gemm-epilogue`: the bias add,
// activation, elementwise multiply and residual add after an FP8 GEMM, and
// the bias add and activation after an FP32 one, become part of the GEMM.
//
// What: a QuantizedGemm whose output flows through a chain of single-reader
// ops, each optional but in this order (the op's own order):
//   1. Add of a constant bias row ([N], [1], [], [1,..,1,N]) when the GEMM has
//      no B: the MatMul sites on 3-D activations (attention projections, FFN
//      layers), which canonicalize leaves as MatMul + Add and insert-scales
//      lowers without a bias — it becomes B (input 3), stored [N];
//   2. Relu, or Gelu with approximate="none", when the GEMM's activation is
//      "none" — it becomes the `activation` attribute;
//   3. Mul by a tensor of the output's own shape (the DCN cross layer's
//      x₀ ⊙ (x W + b)) — Multiplier (input 5);
//   4. Add of a tensor of the output's own shape (a residual) — Residual
//      (input 6);
// takes those operands and writes the chain's result.
//
//        x ──▶ QuantizedGemm(x, W, Ws, _, xs) ─▶ Add(·, b) ─▶ Gelu ─▶ Mul(·, x0) ─▶ Add(·, r) ──▶ out
//      becomes
//        x ──▶ QuantizedGemm(x, W, Ws, b, xs, x0, r) {activation = "gelu"} ──▶ out
//
// Why: on the GPU the FP8 GEMM applies its scales, bias, ReLU and a residual
// inside cuBLASLt (vector scales, C with beta 1), and LoKA's scale epilogue
// pass takes GELU and the DCN cross's multiply; either way bias, activation,
// multiply and add ride on the GEMM instead of up to four more kernels that
// read and write the output again (the attention ranker's FFN: Add + Gelu
// over [B·T, 4d]).
// On the CPU the op performs the same float operations in the same order as
// the nodes (Σ + B, then the ONNX Relu/Gelu formula, then Mul and Add), so the
// rewrite is bit-exact.
//
// Requires: the QuantizedGemm without inputs 5 and 6; each intermediate value
// read once and not a graph output; the bias a float32 initializer, known N;
// the other operand of Mul/Add float32 with exactly the output's shape, every
// dim known or named the same (no broadcasting: the op has none); all ops in
// the ONNX domain. The chain's last value may be a graph output (the GEMM then
// writes it, under its name).
// Guarantees: the GEMM keeps its name; its annotation entry lists the fused
// nodes' names in "from"; the chain's last value keeps its name and readers; a
// bias constant no longer read is dropped.
// FP32 sites (those the Probe kept in FP32 or a pin sends to BF16) have no
// QuantizedGemm: a Gemm (transA = 0, alpha = beta = 1, C absent or a bias
// row) followed by Relu/Gelu, or a MatMul of an activation by a 2-D float32
// constant followed by a bias Add and/or Relu/Gelu, either then followed by a
// residual Add (or a Gemm followed by a residual Add alone), becomes
// ai.loka::FusedGemm(X, W, B, Residual) {transB, activation}
// (docs/loka_ops.md) — one cuBLASLt GEMM with its bias/ReLU epilogue and the
// residual as its C on the GPU instead of up to four kernels (the attention ranker's 3-D MatMul sites ran a separate
// broadcast bias add, 13% of its time at batch 4096 on an H200). The same
// float operations in the same order on the CPU: bit-exact.
// Does not: fuse out of order (a Mul after the residual Add, a bias after the
// activation, a second bias onto an existing B: (Σ + B₁) + B₂ would round
// differently), the tanh GELU, other activations, a Multiplier onto a
// FusedGemm, a Gemm with alpha or beta other than 1, or a MatMul whose right
// operand is computed (activation x activation).
// ============================================================================
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "passes/ir/graph.h"
#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-gemm-epilogue`.
PassInfo fuse_gemm_epilogue_pass_info();
/// A fresh `fuse-gemm-epilogue` pass.
std::unique_ptr<Pass> make_fuse_gemm_epilogue_pass();

/// Whether `gemm` is a float Gemm or MatMul of the FusedGemm form above, with or without an
/// epilogue to fold: what `become_fused_gemm` rewrites.
bool can_become_fused_gemm(const ir::Node& gemm);

/// Rewrites such a node (and the epilogue after it, if any is left) as one ai.loka::FusedGemm
/// under its name, computing the same bits: for store-activations-bf16, since FusedGemm reads a
/// BFLOAT16 X and Gemm and MatMul do not. The nodes it absorbs are added to the node's "from" in
/// `annotations` (the model's annotation document), as the pass itself records them. An error
/// when `can_become_fused_gemm` is false.
Status become_fused_gemm(ir::Graph& graph, ir::Node& gemm, nlohmann::json& annotations);

}  // namespace loka
