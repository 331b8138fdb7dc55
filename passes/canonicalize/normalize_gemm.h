// ============================================================================
// passes/canonicalize/normalize_gemm.h — `normalize-gemm`: one storage form
// for Gemm weights, so later passes (FP8 weight quantization, Dispatch) and
// the cuBLASLt "TN" layout see a single case.
//
//   Gemm(A, B:[K,N] const, C) {alpha, beta, transB=0}
//     ==>  Gemm(A, alpha·Bᵀ:[N,K] const, beta·C:[N]) {transB=1}
//
// On constant operands only: alpha is folded into B and beta into C (FP32
// operands; beta is dropped when there is no C), transA=1 on a constant A is
// materialised, B is stored transposed ([N,K], transB=1), and a [1,N] C is
// stored as [N]. Default-valued attributes are removed; transB=1 is explicit.
// A weight shared by several Gemms is transposed once.
//
// Requires: nothing. Guarantees: the same product, up to FP32 rounding of
// the folded scale (alpha·(A·B) becomes A·(alpha·B)). Does not: touch
// non-constant operands (alpha/beta/trans on activations stay attributes),
// or FP8/integer weights beyond moving bytes for a transpose.
// ============================================================================
#pragma once

#include <memory>

#include "passes/pass.h"

namespace loka {

PassInfo normalize_gemm_pass_info();
std::unique_ptr<Pass> make_normalize_gemm_pass();

}  // namespace loka
