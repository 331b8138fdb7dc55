// ============================================================================
// passes/probe/statistics.cc — streaming estimators with bounded memory.
// ============================================================================
#include "passes/probe/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace loka::probe {

void BatchMeans::add(double value) {
  ++count_;
  sum_ += value;
  sum_squares_ += value * value;
}

double BatchMeans::stddev() const {
  if (count_ < 2) return 0.0;
  const double n = static_cast<double>(count_);
  const double variance = (sum_squares_ - sum_ * sum_ / n) / (n - 1);
  return variance > 0 ? std::sqrt(variance) : 0.0;
}

double student_t_975(size_t dof) {
  static constexpr double kTable[] = {0,     12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                      2.201, 2.179,  2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                      2.080, 2.074,  2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (dof == 0) return std::numeric_limits<double>::infinity();
  if (dof < std::size(kTable)) return kTable[dof];
  return 1.96 + 2.4 / static_cast<double>(dof);  // within 0.01 of the exact quantile beyond 30
}

std::pair<double, double> BatchMeans::ci95() const {
  if (count_ < 2) return {-std::numeric_limits<double>::infinity(), std::numeric_limits<double>::infinity()};
  const double half = student_t_975(count_ - 1) * stddev() / std::sqrt(static_cast<double>(count_));
  return {mean() - half, mean() + half};
}

void ValueStatistics::add(std::span<const float> values) {
  float batch_amax = 0;
  for (float v : values) {
    if (!std::isfinite(v)) {
      ++non_finite_;
      continue;
    }
    ++count_;
    const double d = v;
    sum_ += d;
    sum2_ += d * d;
    sum3_ += d * d * d;
    sum4_ += d * d * d * d;
    const float magnitude = std::fabs(v);
    batch_amax = std::max(batch_amax, magnitude);
    if (magnitude < std::ldexp(1.0f, kMinExponent)) {
      ++zeros_;
      continue;
    }
    const int bin = static_cast<int>(std::floor((std::log2(magnitude) - kMinExponent) * kBinsPerOctave));
    ++bins_[static_cast<size_t>(std::clamp(bin, 0, kBins - 1))];
  }
  amax_ = std::max(amax_, batch_amax);
  batch_amax_.add(batch_amax);
}

double ValueStatistics::mean() const { return count_ ? sum_ / static_cast<double>(count_) : 0.0; }

double ValueStatistics::stddev() const {
  if (count_ < 2) return 0.0;
  const double m = mean();
  const double variance = sum2_ / static_cast<double>(count_) - m * m;
  return variance > 0 ? std::sqrt(variance) : 0.0;
}

double ValueStatistics::kurtosis() const {
  const double s = stddev();
  if (count_ < 2 || s == 0) return 0.0;
  const double n = static_cast<double>(count_);
  const double m = mean();
  const double fourth = sum4_ / n - 4 * m * sum3_ / n + 6 * m * m * sum2_ / n - 3 * m * m * m * m;
  return fourth / (s * s * s * s) - 3.0;
}

double ValueStatistics::fraction_below(double threshold) const {
  const uint64_t nonzero = count_ - zeros_;
  if (nonzero == 0) return 0.0;
  const double position = (std::log2(threshold) - kMinExponent) * kBinsPerOctave;
  if (position <= 0) return 0.0;
  double below = 0;
  for (int b = 0; b < kBins; ++b) {
    if (b + 1 <= position) below += static_cast<double>(bins_[static_cast<size_t>(b)]);
    else if (b < position) below += static_cast<double>(bins_[static_cast<size_t>(b)]) * (position - b);
    else break;
  }
  return below / static_cast<double>(nonzero);
}

double ValueStatistics::magnitude_percentile(double p) const {
  const uint64_t nonzero = count_ - zeros_;
  if (nonzero == 0) return 0.0;
  const double target = p * static_cast<double>(nonzero);
  double seen = 0;
  for (int b = 0; b < kBins; ++b) {
    seen += static_cast<double>(bins_[static_cast<size_t>(b)]);
    if (seen >= target) return std::min<double>(amax_, std::exp2(kMinExponent + (b + 1.0) / kBinsPerOctave));
  }
  return amax_;
}

double ValueStatistics::dynamic_range_log2() const {
  for (int b = 0; b < kBins; ++b)
    if (bins_[static_cast<size_t>(b)]) {
      const double smallest = std::exp2(kMinExponent + static_cast<double>(b) / kBinsPerOctave);
      return amax_ > 0 ? std::log2(amax_ / smallest) : 0.0;
    }
  return 0.0;
}

double ValueStatistics::underflow_fraction(float scale, cpu::Fp8Format format) const {
  // Values below half the smallest subnormal round to zero: 2^-10 (E4M3FN) or 2^-17 (E5M2), times the scale.
  return fraction_below(0.5 * cpu::fp8_smallest_subnormal(format) * scale);
}

double ValueStatistics::subnormal_fraction(float scale, cpu::Fp8Format format) const {
  return fraction_below(static_cast<double>(cpu::fp8_smallest_normal(format)) * scale);
}

double ValueStatistics::saturation_fraction(float scale, cpu::Fp8Format format) const {
  const uint64_t nonzero = count_ - zeros_;
  if (nonzero == 0) return 0.0;
  return 1.0 - fraction_below(static_cast<double>(cpu::fp8_max(format)) * scale);
}

double ValueStatistics::batch_amax_drift() const {
  const double m = batch_amax_.mean();
  return m > 0 ? batch_amax_.stddev() / m : 0.0;
}

std::vector<std::pair<int, uint64_t>> ValueStatistics::octave_histogram() const {
  std::vector<std::pair<int, uint64_t>> octaves;
  for (int b = 0; b < kBins; ++b) {
    const uint64_t n = bins_[static_cast<size_t>(b)];
    if (n == 0) continue;
    const int exponent = kMinExponent + b / kBinsPerOctave;
    if (!octaves.empty() && octaves.back().first == exponent) octaves.back().second += n;
    else octaves.emplace_back(exponent, n);
  }
  return octaves;
}

}  // namespace loka::probe
