// ============================================================================
// tests/runtime/arena_plan_test.cc — no two live buffers share bytes; the peak
// (arena_peak) is the most bytes alive at one step, named by what is alive then.
// ============================================================================
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <random>
#include <vector>

#include "runtime/arena_plan.h"

namespace loka {
namespace {

/// Largest sum of bytes alive at one step: no plan can be smaller.
size_t peak_live_bytes(const std::vector<ArenaRequest>& requests, int steps) {
  size_t peak = 0;
  for (int s = -1; s <= steps; ++s) {
    size_t live = 0;
    for (const ArenaRequest& r : requests)
      if (r.first_step <= s && s <= r.last_step) live += (r.bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    peak = std::max(peak, live);
  }
  return peak;
}

TEST(ArenaPlan, RandomChainsNeverOverlapLiveBuffersAndStayNearThePeak) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int steps = 1 + static_cast<int>(rng() % 60);
    std::vector<ArenaRequest> requests;
    for (int s = -1; s < steps; ++s) {
      const int outputs = 1 + static_cast<int>(rng() % 2);
      for (int o = 0; o < outputs; ++o) {
        const int last = s + 1 + static_cast<int>(rng() % 6);
        requests.push_back({static_cast<size_t>(1 + rng() % 100000), s, std::min(last, steps)});
      }
    }
    const ArenaPlan plan = plan_arena(requests);
    ASSERT_EQ(plan.offsets.size(), requests.size());
    for (size_t a = 0; a < requests.size(); ++a) {
      EXPECT_EQ(plan.offsets[a] % kArenaAlignment, 0u);
      EXPECT_LE(plan.offsets[a] + requests[a].bytes, plan.total_bytes);
      for (size_t b = a + 1; b < requests.size(); ++b) {
        const bool live_together =
            requests[a].first_step <= requests[b].last_step && requests[b].first_step <= requests[a].last_step;
        const bool share_bytes = plan.offsets[a] < plan.offsets[b] + requests[b].bytes &&
                                 plan.offsets[b] < plan.offsets[a] + requests[a].bytes;
        EXPECT_FALSE(live_together && share_bytes) << "trial " << trial << ": requests " << a << " and " << b;
      }
    }
    const size_t peak = peak_live_bytes(requests, steps);
    EXPECT_GE(plan.total_bytes, peak);
    EXPECT_LE(plan.total_bytes, peak * 2) << "trial " << trial;
  }
}

TEST(ArenaPlan, ASequentialChainReusesTwoSlots) {
  // x0 -> x1 -> x2 -> ...: each buffer is read only by the next step.
  std::vector<ArenaRequest> requests;
  for (int s = -1; s < 50; ++s) requests.push_back({1000, s, s + 1});
  const ArenaPlan plan = plan_arena(requests);
  EXPECT_EQ(plan.total_bytes, 2 * 1024u);
}

TEST(ArenaPlan, EmptyRequestsStillGetDistinctAlignedSlots) {
  const ArenaPlan plan = plan_arena({{0, 0, 1}, {0, 0, 1}});
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.total_bytes, 2 * kArenaAlignment);
}

TEST(ArenaPeak, NamesTheStepWhereMostBytesLiveAndWhatLivesThenLargestFirst) {
  // A graph input alive to the end (a graph output), a chain, and a large late buffer.
  const std::vector<ArenaRequest> requests = {
      {10, -1, INT_MAX}, {100, 0, 2}, {50, 1, 1}, {200, 3, 4}, {30, 4, 5}};
  const ArenaPeak peak = arena_peak(requests);
  EXPECT_EQ(peak.step, 4);  // 10 + 200 + 30; step 1 holds 10 + 100 + 50
  EXPECT_EQ(peak.live_bytes, 240u);
  EXPECT_EQ(peak.live, (std::vector<size_t>{3, 4, 0}));
}

TEST(ArenaPeak, EqualsTheBruteForcePeakOfRandomChains) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 100; ++trial) {
    const int steps = 1 + static_cast<int>(rng() % 40);
    std::vector<ArenaRequest> requests;
    for (int s = -1; s < steps; ++s)
      requests.push_back({static_cast<size_t>(1 + rng() % 1000), s, std::min(s + 1 + static_cast<int>(rng() % 5), steps)});
    const ArenaPeak peak = arena_peak(requests);
    size_t brute = 0;
    for (int s = -1; s <= steps; ++s) {
      size_t live = 0;
      for (const ArenaRequest& r : requests)
        if (r.first_step <= s && s <= r.last_step) live += r.bytes;
      brute = std::max(brute, live);
    }
    EXPECT_EQ(peak.live_bytes, brute) << "trial " << trial;
    size_t listed = 0;
    for (size_t i : peak.live) {
      EXPECT_TRUE(requests[i].first_step <= peak.step && peak.step <= requests[i].last_step);
      listed += requests[i].bytes;
    }
    EXPECT_EQ(listed, peak.live_bytes) << "trial " << trial;
    EXPECT_TRUE(std::is_sorted(peak.live.begin(), peak.live.end(),
                               [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; }));
  }
}

TEST(ArenaPeak, TiesGoToTheFirstStepAndEqualBuffersKeepTheirOrder) {
  // Steps 0 and 2 both hold 100 bytes: the first is named.
  ArenaPeak peak = arena_peak({{100, 0, 0}, {100, 2, 2}});
  EXPECT_EQ(peak.step, 0);
  EXPECT_EQ(peak.live, (std::vector<size_t>{0}));
  // Equal buffers alive together are listed in request order.
  peak = arena_peak({{50, 0, 3}, {50, 1, 3}, {20, 1, 1}});
  EXPECT_EQ(peak.step, 1);
  EXPECT_EQ(peak.live, (std::vector<size_t>{0, 1, 2}));
}

TEST(ArenaPeak, AGraphInputNothingReadsCanBeThePeakBeforeTheFirstStep) {
  const ArenaPeak peak = arena_peak({{300, -1, -1}, {10, 0, 1}});
  EXPECT_EQ(peak.step, -1);
  EXPECT_EQ(peak.live_bytes, 300u);
  EXPECT_EQ(peak.live, (std::vector<size_t>{0}));
}

TEST(ArenaPeak, NoRequestsNoPeak) {
  const ArenaPeak peak = arena_peak({});
  EXPECT_EQ(peak.step, -1);
  EXPECT_EQ(peak.live_bytes, 0u);
  EXPECT_TRUE(peak.live.empty());
}

}  // namespace
}  // namespace loka
