// ============================================================================
// passes/probe/budget.h — the model-level accuracy budget (`--budget SPEC`).
//
//   rel_l2=0.01      relative L2 error of the model outputs against FP32
//   max_abs=0.001    largest absolute output error
//   logloss=0.0002   relative change of the logloss (needs labels.pb in the data, or a
//                    Sigmoid probability as the first output to draw labels from:
//                    passes/probe/drawn_labels.h)
//   auto (default)   logloss=0.0002 when the calibration data has labels or the model's
//                    first output is a Sigmoid probability, else rel_l2=0.01
//
// A site's share of the budget is budget / sqrt(number of sites): independent
// rounding errors add in quadrature, so every site within its share keeps the
// whole model within the budget.
// ============================================================================
#pragma once

#include <string>

#include "loka/status.h"

namespace loka::probe {

enum class BudgetMetric { kRelL2, kMaxAbs, kLogloss };

struct Budget {
  BudgetMetric metric = BudgetMetric::kRelL2;
  double limit = 0.01;
  bool automatic = false;  ///< "auto": resolved against the data by resolve()

  std::string metric_name() const;
  std::string to_string() const;
  /// Resolves "auto" once it is known whether labels exist (in the data, or drawn).
  Budget resolve(bool have_labels) const;
  /// The per-site threshold for `site_count` sites.
  double site_threshold(size_t site_count) const;
};

/// Parses SPEC; errors say what is accepted.
Result<Budget> parse_budget(const std::string& spec);

}  // namespace loka::probe
