// ============================================================================
// passes/mods/reassociate_matmuls.h — `reassociate-matmuls`: X·(Xᵀ·P) becomes
// (X·Xᵀ)·P when that costs at most max_cost_ratio (default 2) times the
// multiply-adds, so no GEMM reads a transposed left operand.
//
//   X:[B..,n,d] ─▶ Transpose ─▶ MatMul(·, P) ─▶ u ─┐          X ─▶ Transpose ─▶ t ─┐
//   X ─────────────────────────────────────▶ MatMul(X, u) ─▶ y  ==>  X ─▶ MatMul(X, t) ─▶ g ─▶ MatMul(g, P) ─▶ y
//   P:[n,k] constant
//
// Why: Wukong's factorisation machine computes X·(Xᵀ·P) — the optimised form of
// its paper, linear in the token count n. Its inner GEMM reads Xᵀ, which ONNX
// writes as a Transpose: on the GPU a kernel moving all of X twice per layer
// (0.38 ms of Wukong's 3.05 ms at batch 4096 on an H200, four layers), and no
// FP8 GEMM can read a transposed left operand in place (cuBLASLt's FP8 kernels
// are TN only). (X·Xᵀ)·P reads Xᵀ as the *right* operand of X·Xᵀ, which
// fold-transposes then folds into the batched GEMM (transB), and its second
// GEMM is a plain [rows, n] x [n, k] one by a constant. At Wukong's sizes
// (n = 34 or 64 tokens, d = 128, k = 24) the quadratic form does 0.84x and
// 1.58x the multiply-adds, all of them on tensor cores, and moves X once.
//
// Matches: y = MatMul(X, u) with u = MatMul(Transpose(X), P), where the
// Transpose swaps the last two of X's r >= 3 known dims, P is a 2-D float32
// constant [n, k], X is float32 with static n and d, u has no other reader and
// is no graph output, and n²(d + k) <= max_cost_ratio · 2ndk (the multiply-adds
// of the two forms; option max_cost_ratio, default 2). The Transpose is kept (X·Xᵀ reads it; other readers may too).
// Requires: shape-inferred IR. Runs before the Probe, so the sites it measures
// are the ones that will run: g·P is a weight GEMM site, X·Xᵀ an activation
// MatMul site. Guarantees: g's node takes u's producer's name, y keeps its
// value and node; exact in real arithmetic, FP32 rounding differs (another
// association of the same sums). Does not: reassociate other chains, or when
// the quadratic form would cost more than max_cost_ratio times the multiply-adds.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

/// Name, summary, options and statistics of `reassociate-matmuls`.
PassInfo reassociate_matmuls_pass_info();
/// A fresh `reassociate-matmuls` pass.
std::unique_ptr<Pass> make_reassociate_matmuls_pass();

}  // namespace loka
