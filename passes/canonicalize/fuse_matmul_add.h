// ============================================================================
// passes/canonicalize/fuse_matmul_add.h — `fuse-matmul-add`: a 2-D MatMul by
// constant weights followed by a bias Add becomes one Gemm.
//
//   A:[M,K] ─▶ MatMul ─▶ t ─▶ Add ─▶ y            A ─▶ Gemm(A, W, b) ─▶ y
//   W:[K,N] (const) ─┘    b (const) ─┘      ==>
//
// Matches only when A has rank exactly 2 (a Gemm is 2-D; batched MatMuls
// stay), W is a 2-D constant, b is a constant whose shape broadcasts to [N]
// alone ([], [1], [N], [1,N] — a per-row or per-element addend is not a
// bias), the dtypes are float, and t has no reader but the Add and is not a
// graph output (otherwise the unbiased product is still needed). The Gemm
// takes the Add's output name and the MatMul's node name (the site the Probe
// and Dispatch know); b is stored as [N] when it was [1,N].
//
// Requires: types of A (infer-shapes). Guarantees: y is computed as A·W + b,
// as before, up to FP32 summation order. Does not: transpose W into the
// canonical [N,K] + transB=1 form (normalize-gemm does), or fuse a MatMul
// without a bias.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo fuse_matmul_add_pass_info();
std::unique_ptr<Pass> make_fuse_matmul_add_pass();

}  // namespace loka
