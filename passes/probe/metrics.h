// ============================================================================
// passes/probe/metrics.h — model-quality metrics shared by the Probe and by
// pin-precision's measured verification, so both judge drift the same way.
//
// Header-only: passes/CMakeLists.txt lists the probe sources by name.
// ============================================================================
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "loka/tensor.h"

namespace loka::probe {

/// Per-sample binary cross-entropy of the first output against 0/1 labels,
/// over min(outputs, labels) samples; logits are recognised by values outside
/// [0, 1] and pass through a sigmoid.
inline std::vector<double> logloss_terms(const Tensor& prediction, const std::vector<float>& labels) {
  const std::vector<float> values = prediction.to_floats();
  bool logits = false;
  for (float v : values) logits |= (v < 0.0f || v > 1.0f);
  const size_t n = std::min(values.size(), labels.size());
  std::vector<double> terms(n);
  for (size_t i = 0; i < n; ++i) {
    double p = logits ? 1.0 / (1.0 + std::exp(-static_cast<double>(values[i]))) : values[i];
    p = std::clamp(p, 1e-7, 1.0 - 1e-7);
    terms[i] = labels[i] > 0.5f ? -std::log(p) : -std::log(1.0 - p);
  }
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

}  // namespace loka::probe
