// ============================================================================
// kernels/cpu/gemm.cc — packed, register-blocked FP32 GEMM.
//
// op(B) is packed into a row-major [k, n] panel so the inner loop streams
// contiguous memory and the compiler vectorizes it; op(A) is read through its
// strides. Each output accumulates over k in increasing order, from 0, one
// rounded multiply-add per term (no FMA contraction on baseline x86-64), so
// the result is the same for any blocking.
//
// Why the tiling: the Probe runs whole models on the CPU once per site and
// recipe, so this loop is most of loka-opt's time. Each 4 x 16 tile of C keeps
// its accumulators in registers through the whole k loop (the old row-at-a-time
// loop loaded and stored an accumulator row per term), and column strips run
// outermost so the panel strip stays in cache across row tiles. The tile is
// compiled for AVX2 as well and chosen at load on CPUs that have it. 64x1024x1024
// with transB, one core of the 2-core dev machine (2026-11-25): 10.7 GFLOP/s for
// the row-at-a-time loop, 16.9 with the tiles. The pack buffer is reused per thread, so a call allocates nothing in
// steady state (allocating it each call cost a page fault per 4 KiB).
// ============================================================================
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <vector>

namespace loka::cpu {
namespace {

constexpr int64_t kRows = 4;   ///< output rows per micro-tile
constexpr int64_t kCols = 16;  ///< output columns per micro-tile (two AVX2 / four SSE vectors)

// Not under ThreadSanitizer: it instruments the clones' ifunc resolver, which the dynamic
// loader calls before the TSan runtime is up (every program crashed at load, gcc 12).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LOKA_GEMM_NO_CLONES 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define LOKA_GEMM_NO_CLONES 1
#endif
#if defined(__x86_64__) && defined(__GNUC__) && !defined(LOKA_GEMM_NO_CLONES)
#define LOKA_GEMM_TARGETS __attribute__((target_clones("avx2", "default")))
#else
#define LOKA_GEMM_TARGETS
#endif

/// A full kRows x kCols tile of C (rows i0.. of op(A), the strip's columns; `c` points at the
/// tile's first element): its accumulators live in registers for the whole k loop (constant trip counts, so
/// the compiler unrolls and vectorizes them), and each step reads kCols floats of the panel and
/// kRows of A for 2 * kRows * kCols FLOPs.
template <bool kTransA>
[[gnu::always_inline]] inline void tile_kernel(int64_t i0, int64_t k, float alpha, const float* a, int64_t lda,
                                               const float* strip, float beta, float* c, int64_t ldc) {
  float acc0[kCols] = {}, acc1[kCols] = {}, acc2[kCols] = {}, acc3[kCols] = {};
  const auto a_at = [&](int64_t i, int64_t p) { return kTransA ? a[p * lda + i] : a[i * lda + p]; };
  for (int64_t p = 0; p < k; ++p) {
    const float* b = strip + p * kCols;
    const float a0 = a_at(i0, p), a1 = a_at(i0 + 1, p), a2 = a_at(i0 + 2, p), a3 = a_at(i0 + 3, p);
    for (int64_t j = 0; j < kCols; ++j) {
      acc0[j] += a0 * b[j];
      acc1[j] += a1 * b[j];
      acc2[j] += a2 * b[j];
      acc3[j] += a3 * b[j];
    }
  }
  const float* rows[kRows] = {acc0, acc1, acc2, acc3};
  for (int64_t r = 0; r < kRows; ++r) {
    float* c_row = c + r * ldc;
    for (int64_t j = 0; j < kCols; ++j)
      c_row[j] = beta == 0.0f ? alpha * rows[r][j] : alpha * rows[r][j] + beta * c_row[j];
  }
}

/// tile_kernel for either layout of A, built twice, for AVX2 and for baseline x86-64, and picked
/// once at load: 8-wide vectors instead of 4. Never FMA: a fused multiply-add rounds once where
/// the reference rounds twice, and results must not depend on the machine. (Not a template
/// itself: clang cannot take the address of a multiversioned template.)
LOKA_GEMM_TARGETS void gemm_tile(bool trans_a, int64_t i0, int64_t k, float alpha, const float* a, int64_t lda,
                                 const float* strip, float beta, float* c, int64_t ldc) {
  // The layout of A picked once per tile, outside the k loop (inlined into each clone).
  if (trans_a) tile_kernel<true>(i0, k, alpha, a, lda, strip, beta, c, ldc);
  else tile_kernel<false>(i0, k, alpha, a, lda, strip, beta, c, ldc);
}

/// Any rectangle of C (the edges the tiles leave), one output row at a time.
void gemm_edge(int64_t i_begin, int64_t i_end, int64_t j_begin, int64_t j_end, int64_t k, bool trans_a, float alpha,
               const float* a, int64_t lda, const float* panel, int64_t panel_ld, float beta, float* c, int64_t ldc) {
  for (int64_t i = i_begin; i < i_end; ++i)
    for (int64_t j = j_begin; j < j_end; ++j) {
      float acc = 0.0f;
      for (int64_t p = 0; p < k; ++p) acc += (trans_a ? a[p * lda + i] : a[i * lda + p]) * panel[p * panel_ld + j];
      float& out = c[i * ldc + j];
      out = beta == 0.0f ? alpha * acc : alpha * acc + beta * out;
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

  // Column strips outer: each strip of the panel is copied to contiguous [k, kCols] memory once
  // and read by every row tile from L1/L2 (a strided strip cost a cache line per k step).
  thread_local std::vector<float> strip;
  if (strip.size() < static_cast<size_t>(k * kCols)) strip.resize(static_cast<size_t>(k * kCols));
  const int64_t full_rows = m - m % kRows, full_cols = n - n % kCols;
  for (int64_t j0 = 0; full_rows > 0 && j0 < full_cols; j0 += kCols) {
    for (int64_t p = 0; p < k; ++p) std::copy_n(panel + p * panel_ld + j0, kCols, strip.data() + p * kCols);
    for (int64_t i0 = 0; i0 < full_rows; i0 += kRows)
      gemm_tile(trans_a, i0, k, alpha, a, lda, strip.data(), beta, c + i0 * ldc + j0, ldc);
  }
  // The last columns (fewer than kCols) through the same tiles, their strip padded with zeros and
  // C staged through a kRows x kCols buffer, not one scalar output at a time: for the narrow
  // matrices of small models (n = 8, every column an edge) that loop was half of a Probe's time
  // (tiny DHEN, 2026-12-07). Each kept output sums the same terms in the same order.
  if (const int64_t edge_cols = n - full_cols; full_rows > 0 && edge_cols > 0) {
    for (int64_t p = 0; p < k; ++p) {
      float* row = strip.data() + p * kCols;
      std::copy_n(panel + p * panel_ld + full_cols, edge_cols, row);
      std::fill(row + edge_cols, row + kCols, 0.0f);
    }
    float staged[kRows * kCols] = {};
    for (int64_t i0 = 0; i0 < full_rows; i0 += kRows) {
      for (int64_t r = 0; r < kRows && beta != 0.0f; ++r)
        std::copy_n(c + (i0 + r) * ldc + full_cols, edge_cols, staged + r * kCols);
      gemm_tile(trans_a, i0, k, alpha, a, lda, strip.data(), beta, staged, kCols);
      for (int64_t r = 0; r < kRows; ++r) std::copy_n(staged + r * kCols, edge_cols, c + (i0 + r) * ldc + full_cols);
    }
  }
  gemm_edge(full_rows, m, 0, n, k, trans_a, alpha, a, lda, panel, panel_ld, beta, c, ldc);
}

}  // namespace loka::cpu
