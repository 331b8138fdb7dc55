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
#include <string>
#include <vector>

#include "loka/status.h"
#include "loka/tensor.h"
#include "passes/probe/budget.h"

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

/// A test run's outputs against a reference run's, pooled over data sets: how pin-precision's
/// meter (passes/mods/measure_candidate.h) judges a selection against the FP32 model and
/// store-tables-bf16 a trial against the model as it stands, so both measure alike.
struct OutputChange {
  double drift = 0, squared_changes = 0, reference_logloss = 0;  ///< logloss sums
  size_t samples = 0;                                             ///< logloss: labelled samples pooled
  double difference = 0, reference = 0, max_abs = 0;              ///< rel_l2 / max_abs sums

  /// One data set's per-sample logloss terms (logloss_terms) of the two runs; an error when
  /// their counts differ.
  Status add_logloss(const std::vector<double>& reference_terms, const std::vector<double>& test_terms) {
    if (reference_terms.size() != test_terms.size()) return Status::error("first output changed size");
    for (size_t i = 0; i < test_terms.size(); ++i) {
      const double change = test_terms[i] - reference_terms[i];
      drift += change;
      squared_changes += change * change;
      reference_logloss += reference_terms[i];
    }
    samples += test_terms.size();
    return Status::ok();
  }

  /// One data set's outputs (the float ones; others are skipped); an error when their counts or
  /// sizes differ. A non-finite difference makes rel_l2 and max_abs infinite.
  Status add_outputs(const std::vector<Tensor>& reference_outputs, const std::vector<Tensor>& test_outputs) {
    if (reference_outputs.size() != test_outputs.size())
      return Status::error(std::to_string(test_outputs.size()) + " outputs, the reference has " +
                           std::to_string(reference_outputs.size()));
    for (size_t o = 0; o < test_outputs.size(); ++o) {
      if (!dtype_is_float(reference_outputs[o].dtype())) continue;
      const std::vector<float> q = test_outputs[o].to_floats(), r = reference_outputs[o].to_floats();
      if (q.size() != r.size()) return Status::error("output " + std::to_string(o) + " changed size");
      for (size_t i = 0; i < q.size(); ++i) {
        const double d = static_cast<double>(q[i]) - r[i];
        if (!std::isfinite(d)) {
          max_abs = difference = std::numeric_limits<double>::infinity();
          continue;
        }
        difference += d * d;
        reference += static_cast<double>(r[i]) * r[i];
        max_abs = std::max(max_abs, std::fabs(d));
      }
    }
    return Status::ok();
  }

  /// logloss: |pooled drift| relative to the reference logloss; rel_l2: ‖q − r‖ / ‖r‖;
  /// max_abs: the largest |q − r|. Infinity where not finite.
  double value(BudgetMetric metric) const {
    constexpr double kInfinity = std::numeric_limits<double>::infinity();
    switch (metric) {
      case BudgetMetric::kLogloss: {
        const double relative = std::fabs(drift) / reference_logloss;
        return std::isfinite(relative) ? relative : kInfinity;
      }
      case BudgetMetric::kMaxAbs: return max_abs;
      default:
        if (reference > 0) return std::sqrt(difference / reference);
        return difference > 0 ? kInfinity : 0.0;
    }
  }

  /// logloss: sqrt(mean squared change) / mean reference logloss, the spread of one sample's
  /// relative drift (infinity where not finite); 0 for the other metrics.
  double sample_noise(BudgetMetric metric) const {
    if (metric != BudgetMetric::kLogloss) return 0.0;
    const double n = static_cast<double>(samples);
    const double noise = std::sqrt(squared_changes / n) / (reference_logloss / n);
    return std::isfinite(noise) ? noise : std::numeric_limits<double>::infinity();
  }
};

/// A measured error as an eval set of `judged_samples` samples may see it: `value` plus
/// `noise_sigmas` standard deviations of the gap between the calibration figure (pooled over
/// `samples`) and an eval set's (independent samples: their variances add). `samples` 0 (not a
/// logloss figure): `value`.
inline double eval_bound(double value, double sample_noise, size_t samples, double judged_samples,
                         double noise_sigmas) {
  if (samples == 0) return value;
  const double spread = std::sqrt(1.0 / static_cast<double>(samples) + 1.0 / judged_samples);
  return value + noise_sigmas * sample_noise * spread;
}

}  // namespace loka::probe
