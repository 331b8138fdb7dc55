// ============================================================================
// tests/cuda/autotune_timing_test.cc — which candidates the autotuners time
// again (kernels/cuda/autotune_timing.h): per family, the fastest few within
// kCloseFactor of the family's fastest, only for short kernels; negative
// twins for long kernels, lone candidates and candidates too slow to be close.
// Host logic only: runs without a GPU.
// ============================================================================
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernels/cuda/autotune_timing.h"

namespace loka::cuda {
namespace {

using Indices = std::vector<size_t>;

TEST(CloseWinners, TheFastestFewWithinTheFactorOfTheirFamilysBest) {
  // Family 0: 8.0 best; 9.0 and 9.5 within 1.2x; 9.6 too, but only three are re-timed; 12 is not close.
  // Family 1: 20 and 23 close.
  const std::vector<double> medians = {9.0, 8.0, 12.0, 9.5, 9.6, 20.0, 23.0};
  const std::vector<int> families = {0, 0, 0, 0, 0, 1, 1};
  EXPECT_EQ(close_winners(medians, families), (Indices{0, 1, 3, 5, 6}));
}

TEST(CloseWinners, NegativeTwinsLongKernelsLoneCandidatesAndUnmeasuredOnes) {
  // The family's best at 100 µs or more: long kernels are not re-timed.
  EXPECT_TRUE(close_winners({100.0, 101.0}, {0, 0}).empty());
  EXPECT_EQ(close_winners({99.0, 101.0}, {0, 0}), (Indices{0, 1}));
  // One close candidate is no contest; nor is a second one beyond the factor.
  EXPECT_TRUE(close_winners({8.0}, {0}).empty());
  EXPECT_TRUE(close_winners({8.0, 9.7}, {0, 0}).empty());
  // Close across families only: each family alone has one.
  EXPECT_TRUE(close_winners({8.0, 8.1}, {0, 1}).empty());
  // A candidate whose runs were dropped (infinite median) takes no part.
  const double dropped = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(close_winners({8.0, dropped}, {0, 0}).empty());
}

TEST(CloseWinners, OnlyPossiblyCloseCandidatesKeepTheirRuns) {
  EXPECT_TRUE(may_be_retimed(8.0));
  EXPECT_TRUE(may_be_retimed(kRetimeBelowUs * kCloseFactor * 0.99));
  EXPECT_FALSE(may_be_retimed(kRetimeBelowUs * kCloseFactor));
}

}  // namespace
}  // namespace loka::cuda
