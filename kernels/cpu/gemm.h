// ============================================================================
// kernels/cpu/gemm.h — the CPU reference single-precision GEMM.
//
// C = alpha * op(A) * op(B) + beta * C, row-major, FP32 accumulation in the
// natural k order per output so results are reproducible run to run. It is
// the reference every other GEMM (CUDA, FP8 emulation) is checked against;
// clarity and determinism come first, then cache-friendly speed.
// ============================================================================
#pragma once

#include <cstdint>

namespace loka::cpu {

struct GemmShape {
  int64_t m = 0;
  int64_t n = 0;
  int64_t k = 0;
};

/// `a` is [m,k] (or [k,m] when trans_a), `b` is [k,n] (or [n,k] when trans_b),
/// `c` is [m,n]; leading dims are the row lengths as stored. beta == 0 ignores c's contents.
void gemm_f32(const GemmShape& shape, bool trans_a, bool trans_b, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

}  // namespace loka::cpu
