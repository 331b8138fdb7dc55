// ============================================================================
// passes/mods/fuse_attention.h — `fuse-attention`: scaled dot-product
// attention chains become one ai.loka::Attention (docs/loka_ops.md).
//
// Why: exporters write attention as a dozen ops that each pass the whole
// batch through memory: the head split (Reshape, a 5-D Transpose, three
// Gathers), K's transpose, two batched MatMuls, the scale Mul, the Softmax
// and the head merge (Transpose, Reshape). At ranker sizes (40 tokens, 8
// heads of 16) the score tensor is as large as the projections, and these
// ops were half of the attention ranker's GPU time. The fused op reads Q, K
// and V in place from the projections' token-major outputs and writes the
// merged heads: one pass, no score tensor.
//
//   multi-head (packed QKV, torch `reshape(B,N,3,H,D).permute(2,0,3,1,4)`):
//     X ─▶ Reshape[B,N,3,H,D] ─▶ Transpose(2,0,3,1,4) ─┬▶ Gather(0) = q ─────────────────▶ MatMul ─▶ Mul(s) ─▶ Softmax ─▶ MatMul ─▶ Transpose(0,2,1,3) ─▶ Reshape[B,N,H·D] ─▶ Y
//                                                      ├▶ Gather(1) = k ─▶ Transpose(0,1,3,2) ─┘                           │
//                                                      └▶ Gather(2) = v ───────────────────────────────────────────────────┘
//     becomes  Y = ai.loka::Attention(X, X, X){heads=H, head_dim=D, scale=s, q_offset=0, k_offset=H·D, v_offset=2·H·D}
//   multi-head from separate projections: q = Transpose(Reshape(Xq,[B,N,H,D]), 0,2,1,3) (k likewise, or
//     with perm 0,2,3,1 for kᵀ directly), v likewise;
//   single head on 3-D tensors (DHEN's attention module): q [B,N,D], kᵀ = Transpose(k, 0,2,1), v [B,N,D];
//     the output is the second MatMul's.
// The scale is a Mul by a one-element constant on either side or a Div by one
// (its reciprocal then, within an ulp of the division), or absent (1).
//
// Requires: shape-inferred IR; static N, H and D, D ≤ 128 (the CUDA
// kernel's limit); every intermediate value read only inside the chain and
// no graph output; both MatMuls FP32 (annotated precision "fp32" or none: a
// site pinned to BF16 or run in FP8 keeps its precision and its ops).
// Guarantees: exact in FP32 up to summation order; the fused node takes the
// name of the first MatMul (QKᵀ) and its annotation entry gets "op":
// "Attention", "precision": "fp32" and "from": [the absorbed MatMuls,
// scale and Softmax]; head-split nodes nobody else reads are erased; opset
// ai.loka 1 is imported.
// Does not: fuse masked attention (an Add before the Softmax), attention
// whose output is read in the [B,H,N,D] layout, or cross-batch broadcasts.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fuse-attention`.
PassInfo fuse_attention_pass_info();
/// A fresh `fuse-attention` pass.
std::unique_ptr<Pass> make_fuse_attention_pass();

}  // namespace loka
