// ============================================================================
// tests/cuda/fast_divmod_test.cc — FastDivmod's multiply-shift division, on
// the host (same arithmetic as the device's __umulhi), so it runs everywhere.
//
// Every broadcast, copy and index kernel decomposes element indices with it,
// so a wrong quotient anywhere in [0, 2^31) would silently misplace data.
// Checked: divisors 1..4096 against every dividend edge (0, d-1, d, multiples
// ± 1, the top of the range), powers of two and their neighbours up to 2^30,
// large odd divisors, and random pairs.
// ============================================================================
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/fast_divmod.cuh"

namespace loka {
namespace {

constexpr uint32_t kTop = (uint32_t{1} << 31) - 1;  // largest dividend the kernels pass

/// Counts (and reports the first few) n for which FastDivmod(d) disagrees with / and %.
int check_divisor(uint32_t d, const std::vector<uint32_t>& dividends) {
  const cuda::FastDivmod fast(d);
  int failures = 0;
  for (uint32_t n : dividends) {
    uint32_t remainder = 0;
    const uint32_t quotient = fast.divmod(n, remainder);
    if ((quotient != n / d || remainder != n % d) && failures++ < 3)
      ADD_FAILURE() << n << " / " << d << ": got " << quotient << " r " << remainder << ", want " << n / d << " r "
                    << n % d;
  }
  return failures;
}

std::vector<uint32_t> edge_dividends(uint32_t d, std::mt19937& rng) {
  std::vector<uint32_t> n = {0, 1, d - 1, d, d + 1, kTop, kTop - 1, kTop - d, kTop / d * d, kTop / d * d - 1};
  std::uniform_int_distribution<uint32_t> any(0, kTop);
  for (int i = 0; i < 64; ++i) {
    const uint32_t multiple = any(rng) / d * d;
    n.push_back(multiple);
    if (multiple > 0) n.push_back(multiple - 1);
    if (multiple < kTop) n.push_back(multiple + 1);
    n.push_back(any(rng));
  }
  return n;
}

TEST(FastDivmod, SmallDivisorsAtEveryEdge) {
  std::mt19937 rng(3);
  int failures = 0;
  for (uint32_t d = 1; d <= 4096; ++d) failures += check_divisor(d, edge_dividends(d, rng));
  EXPECT_EQ(failures, 0);
}

TEST(FastDivmod, PowersOfTwoTheirNeighboursAndLargeDivisors) {
  std::mt19937 rng(5);
  std::vector<uint32_t> divisors = {kTop, kTop - 1, kTop / 2, kTop / 3, 1000003, 65537, 46341, 729, 1600, 3456};
  for (int k = 1; k <= 30; ++k) {
    const uint32_t p = uint32_t{1} << k;
    divisors.insert(divisors.end(), {p - 1, p, p + 1});
  }
  std::uniform_int_distribution<uint32_t> any(1, kTop);
  for (int i = 0; i < 2000; ++i) divisors.push_back(any(rng));
  int failures = 0;
  for (uint32_t d : divisors) failures += check_divisor(d, edge_dividends(d, rng));
  EXPECT_EQ(failures, 0);
}

TEST(FastDivmod, Divmod64DividesBeyond32Bits) {
  const cuda::Divmod64 divider(int64_t{3} << 33);
  int64_t remainder = 0;
  EXPECT_EQ(divider.divmod((int64_t{14} << 33) + 5, remainder), 4);
  EXPECT_EQ(remainder, (int64_t{2} << 33) + 5);
}

}  // namespace
}  // namespace loka
