// ============================================================================
// tests/passes/probe_statistics_test.cc — the Probe's streaming statistics:
// the per-octave histogram stored in the annotations, against a reference loop.
// ============================================================================
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "passes/probe/statistics.h"

namespace loka::probe {
namespace {

TEST(ValueStatistics, OctaveHistogramCountsEveryNonZeroValueInItsOctave) {
  std::mt19937 rng(17);
  std::normal_distribution<float> log_magnitude(-3.0f, 6.0f);
  std::bernoulli_distribution negative(0.5), zero(0.05);
  ValueStatistics stats;
  std::map<int, uint64_t> expected;
  uint64_t zeros = 0;
  for (int batch = 0; batch < 3; ++batch) {
    std::vector<float> values(1000 + 337 * batch);
    for (float& v : values) {
      v = zero(rng) ? 0.0f : std::exp2(log_magnitude(rng)) * (negative(rng) ? -1.0f : 1.0f);
      if (v == 0.0f) {
        ++zeros;
        continue;
      }
      int exponent = 0;
      std::frexp(v, &exponent);  // |v| = m * 2^exponent, m in [0.5, 1)
      ++expected[exponent - 1];
    }
    values.push_back(NAN);  // counted apart, in no bin
    stats.add(values);
  }
  const auto octaves = stats.octave_histogram();
  ASSERT_EQ(octaves.size(), expected.size());
  auto it = expected.begin();
  for (const auto& [exponent, count] : octaves) {
    EXPECT_EQ(exponent, it->first);
    // log2 near an octave edge may round across it: allow a handful per bin.
    EXPECT_NEAR(static_cast<double>(count), static_cast<double>(it->second), 3.0) << "octave 2^" << exponent;
    ++it;
  }
  uint64_t total = 0;
  for (const auto& [exponent, count] : octaves) total += count;
  EXPECT_EQ(total + stats.zeros(), stats.count());
  EXPECT_EQ(stats.zeros(), zeros);
  EXPECT_EQ(stats.non_finite(), 3u);
  for (size_t i = 1; i < octaves.size(); ++i) EXPECT_LT(octaves[i - 1].first, octaves[i].first);
}

// The share below E4M3's normal range follows where the values sit, not the smallest one seen:
// one stray tiny value moves dynamic_range_log2 by 33 octaves and the share by 0.1%.
TEST(ValueStatistics, SubnormalShareCountsValuesBelowTheSmallestNormalAtTheScale) {
  const float scale = 1.0f / 448.0f;  // amax 1 maps to E4M3's largest finite value
  ValueStatistics stats;
  std::vector<float> values(990, 1.0f);
  values.insert(values.end(), 10, 1e-5f);  // 1e-5 / scale = 2^-7.8: a subnormal code (2^-9..2^-6)
  stats.add(values);
  EXPECT_NEAR(stats.subnormal_fraction(scale, cpu::Fp8Format::kE4M3FN), 0.01, 1e-9);
  EXPECT_EQ(stats.underflow_fraction(scale, cpu::Fp8Format::kE4M3FN), 0.0);  // none flushed
  // E5M2's normals reach 2^-14: 1e-5 / scale sits there, so nothing is subnormal.
  EXPECT_EQ(stats.subnormal_fraction(scale, cpu::Fp8Format::kE5M2), 0.0);
  const double range_before = stats.dynamic_range_log2();
  stats.add(std::vector<float>{1e-15f});  // 2^-49.8 (below 2^-64 would count as zero)
  EXPECT_GT(stats.dynamic_range_log2(), range_before + 30);
  EXPECT_NEAR(stats.subnormal_fraction(scale, cpu::Fp8Format::kE4M3FN), 11.0 / 1001.0, 1e-9);
  // Negative twin: values well inside the normal range leave it at zero.
  ValueStatistics normal;
  normal.add(std::vector<float>{0.5f, -0.25f, 1.0f, 0.01f});
  EXPECT_EQ(normal.subnormal_fraction(scale, cpu::Fp8Format::kE4M3FN), 0.0);
}

TEST(ValueStatistics, OctaveHistogramOfNothingIsEmpty) {
  ValueStatistics stats;
  EXPECT_TRUE(stats.octave_histogram().empty());
  stats.add(std::vector<float>{0.0f, 0.0f});
  EXPECT_TRUE(stats.octave_histogram().empty());
  stats.add(std::vector<float>{1.0f, 1.5f, -3.0f});
  const auto octaves = stats.octave_histogram();
  ASSERT_EQ(octaves.size(), 2u);
  EXPECT_EQ(octaves[0], (std::pair<int, uint64_t>{0, 2}));
  EXPECT_EQ(octaves[1], (std::pair<int, uint64_t>{1, 1}));
}

}  // namespace
}  // namespace loka::probe
