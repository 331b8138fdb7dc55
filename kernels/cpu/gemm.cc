// ============================================================================
// kernels/cpu/gemm.cc — packed, k-blocked FP32 GEMM.
//
// op(B) is packed into a row-major [k, n] panel so the inner loop streams
// contiguous memory and the compiler vectorizes it; op(A) is read through its
// strides. Each output accumulates over k in increasing order.
// ============================================================================
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <vector>

namespace loka::cpu {

void gemm_f32(const GemmShape& shape, bool trans_a, bool trans_b, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  if (m == 0 || n == 0) return;

  // Pack op(B) to [k, n] when it is transposed; otherwise read in place.
  std::vector<float> packed;
  const float* panel = b;
  int64_t panel_ld = ldb;
  if (trans_b) {
    packed.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) packed[static_cast<size_t>(p * n + j)] = b[j * ldb + p];
    panel = packed.data();
    panel_ld = n;
  }

  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) {
    std::fill(row.begin(), row.end(), 0.0f);
    float* acc = row.data();
    for (int64_t p = 0; p < k; ++p) {
      const float a_ip = trans_a ? a[p * lda + i] : a[i * lda + p];
      const float* b_row = panel + p * panel_ld;
      for (int64_t j = 0; j < n; ++j) acc[j] += a_ip * b_row[j];
    }
    float* c_row = c + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < n; ++j) c_row[j] = alpha * acc[j];
    } else {
      for (int64_t j = 0; j < n; ++j) c_row[j] = alpha * acc[j] + beta * c_row[j];
    }
  }
}

}  // namespace loka::cpu
