// ============================================================================
// passes/probe/statistics.h — streaming estimators with bounded memory.
//
// The Probe never stores activations: each batch is folded into fixed-size
// accumulators. `BatchMeans` turns one number per batch into a mean with a
// Student-t 95% confidence interval (batches are the independent samples);
// `ValueStatistics` keeps moments and a log2 histogram (4 bins per octave) of
// every value a tensor took, enough for amax, percentiles, std, kurtosis,
// dynamic range and the fraction of values a given FP8 scale would flush to
// zero or saturate.
// ============================================================================
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "kernels/cpu/fp8_quantize.h"

namespace loka::probe {

/// Mean and 95% CI of one figure observed once per batch.
class BatchMeans {
 public:
  void add(double value);
  size_t count() const { return count_; }
  double mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }
  double stddev() const;
  /// [lo, hi]; infinite half-width with fewer than two samples.
  std::pair<double, double> ci95() const;

 private:
  size_t count_ = 0;
  double sum_ = 0;
  double sum_squares_ = 0;
};

/// Two-sided 97.5% quantile of Student's t with `dof` degrees of freedom.
double student_t_975(size_t dof);

class ValueStatistics {
 public:
  static constexpr int kBinsPerOctave = 4;
  static constexpr int kMinExponent = -64;  ///< |v| below 2^-64 counts as zero
  static constexpr int kMaxExponent = 64;
  static constexpr int kBins = (kMaxExponent - kMinExponent) * kBinsPerOctave;

  /// Folds in one batch of values (non-finite values are counted apart).
  void add(std::span<const float> values);

  uint64_t count() const { return count_; }
  uint64_t zeros() const { return zeros_; }
  uint64_t non_finite() const { return non_finite_; }
  float amax() const { return amax_; }
  double mean() const;
  double stddev() const;
  /// Excess kurtosis (0 for a Gaussian); heavy tails and outliers push it up.
  double kurtosis() const;
  /// |v| below which a fraction `p` of the non-zero finite magnitudes lie (bin resolution).
  double magnitude_percentile(double p) const;
  /// log2(amax / smallest non-zero magnitude's bin), the span FP8 must cover.
  double dynamic_range_log2() const;
  /// Fractions of values that `scale` would flush to zero / clamp at the format's max.
  double underflow_fraction(float scale, cpu::Fp8Format format) const;
  double saturation_fraction(float scale, cpu::Fp8Format format) const;
  /// Fraction of non-zero values that `scale` puts below the format's smallest normal (2^-6 in
  /// E4M3FN, 2^-14 in E5M2), flushed ones included: they keep fewer mantissa bits than the rest.
  /// The dynamic range that costs FP8 precision. dynamic_range_log2 follows the smallest value
  /// seen, so it grows with the calibration data: 2^24-2^27 on well-conditioned full-size
  /// LayerNorm outputs (tens of millions of values); this one does not.
  double subnormal_fraction(float scale, cpu::Fp8Format format) const;
  /// Per-batch amax, for drift across batches (coefficient of variation).
  double batch_amax_drift() const;
  /// The histogram at one bin per octave, non-empty bins only, ascending:
  /// (e, n) means n non-zero finite values had 2^e <= |v| < 2^(e+1). Compact
  /// enough to store per site in the annotations (reports draw it).
  std::vector<std::pair<int, uint64_t>> octave_histogram() const;

 private:
  uint64_t count_ = 0;
  uint64_t zeros_ = 0;
  uint64_t non_finite_ = 0;
  float amax_ = 0;
  double sum_ = 0, sum2_ = 0, sum3_ = 0, sum4_ = 0;
  std::array<uint64_t, kBins> bins_{};
  BatchMeans batch_amax_;
  /// Fraction of non-zero finite values with magnitude below `threshold` (interpolated in its bin).
  double fraction_below(double threshold) const;
};

}  // namespace loka::probe
