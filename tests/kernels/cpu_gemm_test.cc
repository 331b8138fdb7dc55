// ============================================================================
// tests/kernels/cpu_gemm_test.cc — the CPU reference GEMM equals, bit for bit,
// the textbook loop it promises (each output summed over k in increasing order
// from 0, one rounded multiply and one rounded add per term), for every tiling
// edge (rows not a multiple of 4, columns not a multiple of 16 or fewer), both
// transposes, beta, and leading dimensions wider than the rows.
// ============================================================================
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm.h"

namespace loka {
namespace {

/// The promise, written out: `volatile` keeps the compiler from fusing the multiply and add.
float textbook(int64_t i, int64_t j, int64_t k, bool trans_a, bool trans_b, const std::vector<float>& a, int64_t lda,
               const std::vector<float>& b, int64_t ldb) {
  float acc = 0.0f;
  for (int64_t p = 0; p < k; ++p) {
    volatile float product = (trans_a ? a[p * lda + i] : a[i * lda + p]) * (trans_b ? b[j * ldb + p] : b[p * ldb + j]);
    acc += product;
  }
  return acc;
}

TEST(CpuGemm, EqualsTheTextbookLoopBitForBitOnEveryTilingEdge) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> value(-2.0f, 2.0f);
  int cases = 0;
  for (int64_t m : {1, 3, 4, 5, 17})
    for (int64_t n : {1, 8, 15, 16, 17, 33})
      for (int64_t k : {1, 7, 37})
        for (bool trans_a : {false, true})
          for (bool trans_b : {false, true})
            for (float beta : {0.0f, 0.5f}) {
              SCOPED_TRACE(std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k) + (trans_a ? " At" : "") +
                           (trans_b ? " Bt" : "") + " beta " + std::to_string(beta));
              const int64_t lda = (trans_a ? m : k) + 3, ldb = (trans_b ? k : n) + 2, ldc = n + 5;
              std::vector<float> a(static_cast<size_t>((trans_a ? k : m) * lda)), b(static_cast<size_t>((trans_b ? n : k) * ldb));
              std::vector<float> c(static_cast<size_t>(m * ldc));
              for (float& v : a) v = value(rng);
              for (float& v : b) v = value(rng);
              for (float& v : c) v = value(rng);
              const std::vector<float> c_before = c;
              const float alpha = 0.75f;
              cpu::gemm_f32({m, n, k}, trans_a, trans_b, alpha, a.data(), lda, b.data(), ldb, beta, c.data(), ldc);
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = 0; j < n; ++j) {
                  const float sum = textbook(i, j, k, trans_a, trans_b, a, lda, b, ldb);
                  volatile float scaled = alpha * sum;
                  volatile float kept = beta * c_before[static_cast<size_t>(i * ldc + j)];
                  const float expected = beta == 0.0f ? scaled : scaled + kept;
                  const float actual = c[static_cast<size_t>(i * ldc + j)];
                  ASSERT_EQ(std::memcmp(&actual, &expected, sizeof(float)), 0)
                      << "C[" << i << "," << j << "] = " << actual << ", expected " << expected;
                }
              // Padding between rows of C is never written.
              for (int64_t i = 0; i < m; ++i)
                for (int64_t j = n; j < ldc; ++j)
                  ASSERT_EQ(c[static_cast<size_t>(i * ldc + j)], c_before[static_cast<size_t>(i * ldc + j)]);
              ++cases;
            }
  EXPECT_EQ(cases, 5 * 6 * 3 * 2 * 2 * 2);
}

}  // namespace
}  // namespace loka
