// ============================================================================
// kernels/cpu/gemm.cc — packed, register-blocked FP32 GEMM.
//
// op(B) is packed into a row-major [k, n] panel so the inner loop streams
// contiguous memory and the compiler vectorizes it; op(A) is read through its
// strides. Each output accumulates over k in increasing order, from 0, one
// rounded multiply-add per term (no FMA contraction on baseline x86-64), so
// the result is the same for any blocking.
//
// Why the blocking: the Probe runs whole models on the CPU once per site and
// recipe, so this loop is most of loka-opt's time. Streaming the whole panel
// once per output row made it bandwidth-bound on weights of a few MB; a block
// of kRows output rows over a column tile of kCols reuses every panel load
// kRows times, with the block's accumulators (kRows x kCols floats, 8 KiB) in
// L1. The pack buffer is reused per thread, so a call allocates nothing in
// steady state (allocating it each call cost a page fault per 4 KiB).
// ============================================================================
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <vector>

namespace loka::cpu {
namespace {

constexpr int64_t kRows = 4;    ///< output rows per block (panel reuse)
constexpr int64_t kCols = 512;  ///< output columns per tile (accumulators stay in L1)

/// Rows [i0, i0 + rows) x columns [j0, j0 + cols) of C, rows <= kRows, cols <= kCols.
void gemm_block(int64_t i0, int64_t rows, int64_t j0, int64_t cols, int64_t k, bool trans_a, float alpha,
                const float* a, int64_t lda, const float* panel, int64_t panel_ld, float beta, float* c, int64_t ldc) {
  float acc[kRows][kCols];
  for (int64_t r = 0; r < rows; ++r) std::fill(acc[r], acc[r] + cols, 0.0f);
  const auto a_at = [&](int64_t i, int64_t p) { return trans_a ? a[p * lda + i] : a[i * lda + p]; };
  for (int64_t p = 0; p < k; ++p) {
    const float* b_row = panel + p * panel_ld + j0;
    if (rows == kRows) {
      const float a0 = a_at(i0, p), a1 = a_at(i0 + 1, p), a2 = a_at(i0 + 2, p), a3 = a_at(i0 + 3, p);
      for (int64_t j = 0; j < cols; ++j) {
        const float b = b_row[j];
        acc[0][j] += a0 * b;
        acc[1][j] += a1 * b;
        acc[2][j] += a2 * b;
        acc[3][j] += a3 * b;
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const float a_ip = a_at(i0 + r, p);
        for (int64_t j = 0; j < cols; ++j) acc[r][j] += a_ip * b_row[j];
      }
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    float* c_row = c + (i0 + r) * ldc + j0;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < cols; ++j) c_row[j] = alpha * acc[r][j];
    } else {
      for (int64_t j = 0; j < cols; ++j) c_row[j] = alpha * acc[r][j] + beta * c_row[j];
    }
  }
}

}  // namespace

void gemm_f32(const GemmShape& shape, bool trans_a, bool trans_b, float alpha, const float* a, int64_t lda,
              const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const int64_t m = shape.m, n = shape.n, k = shape.k;
  if (m == 0 || n == 0) return;

  // Pack op(B) to [k, n] when it is transposed; otherwise read in place.
  thread_local std::vector<float> packed;
  const float* panel = b;
  int64_t panel_ld = ldb;
  if (trans_b) {
    if (packed.size() < static_cast<size_t>(k * n)) packed.resize(static_cast<size_t>(k * n));
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p) packed[static_cast<size_t>(p * n + j)] = b[j * ldb + p];
    panel = packed.data();
    panel_ld = n;
  }

  for (int64_t j0 = 0; j0 < n; j0 += kCols)
    for (int64_t i0 = 0; i0 < m; i0 += kRows)
      gemm_block(i0, std::min(kRows, m - i0), j0, std::min(kCols, n - j0), k, trans_a, alpha, a, lda, panel, panel_ld,
                 beta, c, ldc);
}

}  // namespace loka::cpu
