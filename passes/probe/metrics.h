// ============================================================================
// passes/probe/metrics.h — model-quality metrics shared by the Probe and by
// pin-precision's measured verification, so both judge drift the same way.
//
// Header-only: passes/CMakeLists.txt lists the probe sources by name.
// ============================================================================
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "loka/tensor.h"

namespace loka::probe {

/// Whether a model output holds logits rather than probabilities: values
/// outside [0, 1].
inline bool holds_logits(const std::vector<float>& values) {
  for (float v : values)
    if (v < 0.0f || v > 1.0f) return true;
  return false;
}

/// The probability of a 0/1 label being 1, clamped away from 0 and 1.
inline double probability(float value, bool logit) {
  const double p = logit ? 1.0 / (1.0 + std::exp(-static_cast<double>(value))) : value;
  return std::clamp(p, 1e-7, 1.0 - 1e-7);
}

inline double cross_entropy(double p, float label) { return label > 0.5f ? -std::log(p) : -std::log(1.0 - p); }

/// Per-sample binary cross-entropy of the first output against 0/1 labels,
/// over min(outputs, labels) samples; logits pass through a sigmoid.
inline std::vector<double> logloss_terms(const Tensor& prediction, const std::vector<float>& labels) {
  const std::vector<float> values = prediction.to_floats();
  const bool logits = holds_logits(values);
  const size_t n = std::min(values.size(), labels.size());
  std::vector<double> terms(n);
  for (size_t i = 0; i < n; ++i) terms[i] = cross_entropy(probability(values[i], logits), labels[i]);
  return terms;
}

/// Summed binary cross-entropy (see logloss_terms); the sample count goes to `count`.
inline double logloss_sum(const Tensor& prediction, const std::vector<float>& labels, size_t& count) {
  const std::vector<double> terms = logloss_terms(prediction, labels);
  count = terms.size();
  double total = 0;
  for (double t : terms) total += t;
  return total;
}

/// Mean binary cross-entropy (see logloss_sum); 0 without samples.
inline double logloss(const Tensor& prediction, const std::vector<float>& labels) {
  size_t n = 0;
  const double total = logloss_sum(prediction, labels, n);
  return n ? total / static_cast<double>(n) : 0.0;
}

/// How a perturbed run moves the logloss of one labelled batch, per sample,
/// against the FP32 reference. Means, not relative to the reference logloss.
///
/// The drift an eval set shows splits into a systematic part and noise:
///  - `expected`: the mean KL(p_ref || p_test), the drift labels drawn from
///    the reference model's own probabilities would show on average. It is
///    second order in the output error, never negative, and adds up over
///    independent error sources, so a few hundred samples pin it down.
///  - `second_moment`: the mean squared per-sample change of the logloss
///    under the real labels. First order in the output error, it averages out
///    over samples but leaves sqrt(second_moment / n) of noise on an n-sample
///    eval set.
///  - `drift`: the measured mean change itself (noisy; for reports).
struct LoglossShift {
  double expected = 0;
  double second_moment = 0;
  double drift = 0;
  size_t samples = 0;
};

inline LoglossShift logloss_shift(const Tensor& reference, const Tensor& test, const std::vector<float>& labels) {
  const std::vector<float> r = reference.to_floats(), t = test.to_floats();
  const bool logits = holds_logits(r);
  LoglossShift shift;
  shift.samples = std::min({r.size(), t.size(), labels.size()});
  if (shift.samples == 0) return shift;
  for (size_t i = 0; i < shift.samples; ++i) {
    const double p = probability(r[i], logits), q = probability(t[i], logits);
    shift.expected += p * std::log(p / q) + (1.0 - p) * std::log((1.0 - p) / (1.0 - q));
    const double change = cross_entropy(q, labels[i]) - cross_entropy(p, labels[i]);
    shift.second_moment += change * change;
    shift.drift += change;
  }
  const double n = static_cast<double>(shift.samples);
  shift.expected /= n;
  shift.second_moment /= n;
  shift.drift /= n;
  return shift;
}

/// How many standard deviations of eval-set noise a logloss budget allows for
/// by default (probe option noise_sigmas). One: on the zoo's 2048-sample eval
/// sets a single FP8 GEMM already leaves about 0.04% of noise on the logloss,
/// so a 95% bound (1.96) admits almost no FP8, while one sigma kept every zoo
/// model within a 0.02% budget with up to a third of the GEMM FLOPs in FP8
/// (measured 2026-11-22).
inline constexpr double kDefaultNoiseSigmas = 1.0;

/// The relative logloss drift an eval set of `samples` samples risks, at
/// `noise_sigmas` standard deviations of noise, from `sites` sites that each behave like this one: relative `expected` and
/// `second_moment` (see LoglossShift), scaled to one site's share of the
/// budget (budget / sqrt(sites)). The expected parts add linearly, the noise
/// in quadrature, so this is sqrt(sites) * expected + noise.
inline double logloss_site_risk(double expected, double second_moment, double samples, size_t sites,
                                double noise_sigmas) {
  const double noise = std::sqrt(std::max(0.0, second_moment) / std::max(1.0, samples));
  return std::sqrt(static_cast<double>(std::max<size_t>(1, sites))) * expected + noise_sigmas * noise;
}

/// The inverse for one site: how many samples bring its risk, expected + noise_sigmas *
/// sqrt(second_moment / samples), within `limit`; infinity when `expected` alone reaches it.
inline double logloss_samples_to_fit(double expected, double second_moment, double limit, double noise_sigmas) {
  if (!(expected < limit)) return std::numeric_limits<double>::infinity();
  const double room = limit - expected;
  return noise_sigmas * noise_sigmas * std::max(0.0, second_moment) / (room * room);
}

}  // namespace loka::probe
