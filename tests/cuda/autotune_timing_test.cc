// ============================================================================
// tests/cuda/autotune_timing_test.cc — which candidates the autotuners time
// again (kernels/cuda/autotune_timing.h): per family, the fastest few within
// kCloseFactor (or kCloseMarginUs) of the family's fastest, only for short kernels, and the
// families' fastest when close to each other; negative twins for long kernels,
// lone candidates and candidates too slow to be close.
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
  // One close candidate is no contest; nor is a second one beyond both the factor and the margin.
  EXPECT_TRUE(close_winners({8.0}, {0}).empty());
  EXPECT_TRUE(close_winners({8.0, 11.5}, {0, 0}).empty());
  EXPECT_TRUE(close_winners({50.0, 61.0}, {0, 0}).empty());
  // Families' fastest beyond the factor and margin of each other: no contest between them either.
  EXPECT_TRUE(close_winners({8.0, 11.5}, {0, 1}).empty());
  // A candidate whose runs were dropped (infinite median) takes no part.
  const double dropped = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(close_winners({8.0, dropped}, {0, 0}).empty());
}

TEST(CloseWinners, ShortKernelsWithinAFewMicrosecondsAreClose) {
  // 10.5 is 1.31x an 8 µs best, within its 3 µs: re-timed (the DHEN batch-512 case).
  EXPECT_EQ(close_winners({8.0, 10.5}, {0, 0}), (Indices{0, 1}));
  EXPECT_TRUE(close_to(10.9, 8.0));
  EXPECT_FALSE(close_to(11.1, 8.0));
  // A long kernel: the factor decides, 3 µs is noise within it.
  EXPECT_TRUE(close_to(59.0, 50.0));
  EXPECT_FALSE(close_to(61.0, 50.0));
}

TEST(CloseWinners, TheFamiliesFastestWhenCloseToEachOther) {
  // FP8 7.1 and BF16 6.7 (each alone in its family) are re-timed side by side; TF32 at 10 is not close.
  EXPECT_EQ(close_winners({7.1, 6.7, 10.0}, {3, 2, 1}), (Indices{0, 1}));
  // Family 0's 8.5 is re-timed within its family (close to its 7.2); family 1's fastest, 8.6, is
  // close to 7.2 and joins across families, its 12.0 is close to nothing; each index once.
  EXPECT_EQ(close_winners({7.2, 8.5, 8.6, 12.0}, {0, 0, 1, 1}), (Indices{0, 1, 2}));
  // A long fastest kernel: nothing across families either.
  EXPECT_TRUE(close_winners({150.0, 151.0}, {0, 1}).empty());
}

TEST(CloseWinners, OnlyPossiblyCloseCandidatesKeepTheirRuns) {
  EXPECT_TRUE(may_be_retimed(8.0));
  EXPECT_TRUE(may_be_retimed(kRetimeBelowUs * kCloseFactor * 0.99));
  EXPECT_FALSE(may_be_retimed(kRetimeBelowUs * kCloseFactor));
}

}  // namespace
}  // namespace loka::cuda
