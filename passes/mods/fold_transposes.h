// ============================================================================
// passes/mods/fold_transposes.h — `fold-transposes`: a batched MatMul whose
// right operand is a Transpose of its last two dims reads the untransposed
// tensor instead, as a batched ai.loka FusedGemm with transB = 1.
//
//   A:[B..,M,K] ───────────────────────▶ MatMul ─▶ y        A ─▶ FusedGemm(A, X, transB=1) ─▶ y
//   X:[B..,N,K] ─▶ Transpose(perm swaps ─┘            ==>   X ─┘
//                  the last two dims)
//
// Why: ONNX MatMul has no transpose attribute, so exporters write X·Yᵀ (DHEN's
// dot interaction X·Xᵀ, Wukong's after reassociate-matmuls) as a
// Transpose feeding the MatMul. On the GPU that Transpose is a kernel of its
// own moving the whole tensor twice — at batch 4096, 0.06-0.09 ms for each of
// DHEN's [B, 34, 128] ones — while cuBLASLt reads a transposed operand in
// place at no cost (its TRANSA).
//
// Matches: a default-domain MatMul whose input 1 is a Transpose with perm
// (0, 1, ..., r-3, r-1, r-2), both operands float32 of known equal rank r >= 3
// with equal leading dims (the same sizes or the same symbols: a batch that
// broadcasts is not a strided batch) and equal K. The Transpose stays when
// something else reads it, and is erased when not.
// Requires: shape-inferred IR. Runs after fuse-attention, which matches
// scores = MatMul(Q, Transpose(K)) itself, and before dispatch, which times
// the FusedGemm's batched_nt key.
// Guarantees: the FusedGemm takes the MatMul's node name (the site the Probe
// annotated) and its output value; it computes the same sums (docs/loka_ops.md,
// FusedGemm with a batched W). Does not: fold a transposed left operand (no
// transA in FusedGemm), a 2-D product (a constant Transpose folds away in
// canonicalize; an activation one is rare), or any other perm.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `fold-transposes`.
PassInfo fold_transposes_pass_info();
/// A fresh `fold-transposes` pass.
std::unique_ptr<Pass> make_fold_transposes_pass();

}  // namespace loka
